package consumergroup

import (
	"time"

	"kaas/storage/offsetlog"
)

// Env is everything a Group needs from outside. The group actor
// implements it with real timers and the offsets writer; tests with a
// fake clock.
type Env interface {
	// Now is the current time.
	Now() time.Time
	// Schedule arranges for Group.Fire(t) to be called after d, and
	// returns a function that cancels it. A cancelled or stale timer
	// may still fire; Fire ignores those.
	Schedule(d time.Duration, t Timer) (cancel func())
	// Persist appends e to the group's slot log. done is called later
	// (never from inside Persist) with 0 once the entry is durable, or
	// the Kafka error code that failed it, and the sequence number of
	// its first record.
	Persist(e offsetlog.Entry, done func(code int16, firstSeq uint64))
	// RebalanceStarted counts a rebalance (metrics): a classic group
	// preparing to rebalance, or a consumer group's epoch bump.
	RebalanceStarted()
	// Topics is the broker's current topics, for consumer groups'
	// subscriptions and regexes.
	Topics() TopicsImage
}

// TopicsImage is the topics a consumer group can subscribe to.
type TopicsImage interface {
	// ByName returns a topic's id and partition count.
	ByName(name string) (id TopicID, partitions int32, ok bool)
	// ByID returns a topic's name.
	ByID(id TopicID) (name string, ok bool)
	// Names lists every topic, internal ones included.
	Names() []string
	// Version changes whenever topics are created, deleted or grown
	// (stored with resolved regexes, as Apache stores the metadata
	// offset).
	Version() int64
}

type timerKind uint8

const (
	heartbeatTimer timerKind = iota + 1
	pendingMemberTimer
	joinTimer
	syncTimer
	consumerSessionTimer
	consumerRebalanceTimer
	consumerJoinTimer
	consumerSyncTimer
)

// Timer identifies one scheduled expiry; Env hands it back to Fire.
type Timer struct {
	kind       timerKind
	member     string
	token      uint64
	generation int32
}
