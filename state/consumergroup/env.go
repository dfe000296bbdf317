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
	// RebalanceStarted counts a rebalance (metrics).
	RebalanceStarted()
}

type timerKind uint8

const (
	heartbeatTimer timerKind = iota + 1
	pendingMemberTimer
	joinTimer
	syncTimer
)

// Timer identifies one scheduled expiry; Env hands it back to Fire.
type Timer struct {
	kind       timerKind
	member     string
	token      uint64
	generation int32
}
