package messages

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/state/sharegroup"
	"kaas/state/sharepartition"
)

// The messages the share coordinator actor takes (KIP-932). Each Reply is
// called exactly once, from the actor.

// ShareHeartbeat is a ShareGroupHeartbeat.
type ShareHeartbeat struct {
	Request sharegroup.HeartbeatRequest
	Reply   func(sharegroup.HeartbeatResult)
}

// Fail answers a ShareHeartbeat whose handling panicked.
func (m *ShareHeartbeat) Fail(any) {
	m.Reply(sharegroup.HeartbeatResult{Code: kerr.UnknownServerError.Code})
}

// ShareGroupConfigs replaces the share groups' own configurations (GROUP
// config resources: every group that has any, by id).
type ShareGroupConfigs struct {
	PerGroup map[string]sharegroup.Config
}

// ShareAcks are one partition's acknowledgements.
type ShareAcks struct {
	TP      model.TopicIDPartition
	Batches []sharepartition.AckBatch
}

// ShareFetch is a ShareFetch, or a ShareAcknowledge (AckOnly), or a long
// poll asking again (Retry: no session step, no acknowledgements).
type ShareFetch struct {
	Session sharegroup.SessionRequest
	Acks    []ShareAcks
	// AllowRenew: the request is IsRenewAck (v2), which alone may renew.
	AllowRenew bool
	// AckOnly: acknowledge, fetch nothing (ShareAcknowledge, or a
	// ShareFetch with IsRenewAck).
	AckOnly bool
	Retry   bool
	// HeldUp: a Retry whose wait is already cut short by a HeldUpWait
	// (ShareFetchResult), which it does not get again.
	HeldUp     bool
	MaxRecords int
	// BatchSize and Mode are how records are handed out (ShareFetch v1's
	// BatchSize, v2's ShareAcquireMode; sharepartition.Want).
	BatchSize int
	Mode      sharepartition.Mode
	MaxBytes  int32
	// CanRead says whether the client may READ a topic.
	CanRead func(topic string) bool
	Reply   func(ShareFetchResult)
}

// Fail answers a ShareFetch whose handling panicked.
func (m *ShareFetch) Fail(any) { m.Reply(ShareFetchResult{Code: kerr.UnknownServerError.Code}) }

// ShareFetchPartition is one partition of the answer.
type ShareFetchPartition struct {
	TP       model.TopicIDPartition
	Code     int16 // the fetch's
	AckCode  int16 // its acknowledgements'
	Records  []byte
	Acquired []sharepartition.Range
	// Release lets go of the buffer Records is in, once the answer is
	// written (nil: nothing to release).
	Release func()
}

// Release lets go of every partition's record buffer; nil when none
// holds one.
func (r ShareFetchResult) Release() func() {
	var rs []func()
	for _, p := range r.Partitions {
		if p.Release != nil {
			rs = append(rs, p.Release)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	return func() {
		for _, f := range rs {
			f()
		}
	}
}

// ShareFetchResult is a ShareFetch's answer.
type ShareFetchResult struct {
	Code         int16
	LockDuration time.Duration
	Partitions   []ShareFetchPartition
	// Acquired counts the records handed out; with none, the handler may
	// wait for Watch's partitions to grow or for Released to close (a
	// record of this group became available) and ask again.
	Acquired int
	Watch    []model.TopicIDPartition
	Released <-chan struct{}
	// Failed: some partition failed to read (answer at once).
	Failed bool
	// HeldUpWait, when not 0, bounds the handler's wait below MaxWait:
	// nothing was acquired because a window is full and the fetching
	// member holds its first records (sharepartition.Partition.HeldUpBy),
	// so what the fetch waits for is mostly the member's own
	// acknowledgement, which its client sends after the answer.
	HeldUpWait time.Duration
}

// ShareDescribe describes share groups (ShareGroupDescribe, the
// inspector).
type ShareDescribe struct {
	Groups []string // nil: every group
	// Records is how many in-flight records of each share-partition to
	// list (0: none, only the counts).
	Records int
	Reply   func([]sharegroup.Description)
}

// Fail answers a ShareDescribe whose handling panicked.
func (m *ShareDescribe) Fail(any) { m.Reply(nil) }

// ShareAlterOffsets is AlterShareGroupOffsets: new start offsets for
// share-partitions of an empty group. Code is the group's, Codes each
// partition's (persisted before the answer).
type ShareAlterOffsets struct {
	Group   string
	Offsets map[model.TopicIDPartition]int64
	Reply   func(code int16, codes map[model.TopicIDPartition]int16)
}

// Fail answers a ShareAlterOffsets whose handling panicked.
func (m *ShareAlterOffsets) Fail(any) { m.Reply(kerr.UnknownServerError.Code, nil) }

// ShareDeleteOffsets is DeleteShareGroupOffsets: forget the
// share-partitions of topics of an empty group.
type ShareDeleteOffsets struct {
	Group  string
	Topics []sharegroup.TopicID
	Reply  func(code int16)
}

// Fail answers a ShareDeleteOffsets whose handling panicked.
func (m *ShareDeleteOffsets) Fail(any) { m.Reply(kerr.UnknownServerError.Code) }

// ShareDeleteGroup is DeleteGroups for a share group: an empty group is
// deleted with its share state.
type ShareDeleteGroup struct {
	Group string
	Reply func(code int16)
}

// Fail answers a ShareDeleteGroup whose handling panicked.
func (m *ShareDeleteGroup) Fail(any) { m.Reply(kerr.UnknownServerError.Code) }

// ShareConnectionClosed says a connection that opened a member's share
// session closed: the session ends, if that connection still owns it.
type ShareConnectionClosed struct {
	Group, Member string
	Owner         any
}
