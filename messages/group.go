package messages

import (
	"kaas/state/consumergroup"

	"kaas/model"
)

// The messages a group actor takes. Each Reply is called exactly once,
// from the group actor, after the group's published summary is updated.

// JoinGroup parks until the rebalance's join phase completes.
type JoinGroup struct {
	Request consumergroup.JoinRequest
	Reply   func(consumergroup.JoinResult)
}

// Fail answers a JoinGroup whose handling panicked.
func (m *JoinGroup) Fail(any) {
	m.Reply(consumergroup.JoinResult{Err: -1, MemberID: m.Request.MemberID, Generation: -1})
}

// SyncGroup parks followers until the leader's assignment is durable.
type SyncGroup struct {
	Request consumergroup.SyncRequest
	Reply   func(consumergroup.SyncResult)
}

// Fail answers a SyncGroup whose handling panicked.
func (m *SyncGroup) Fail(any) { m.Reply(consumergroup.SyncResult{Err: -1}) }

// Heartbeat keeps a member's session alive.
type Heartbeat struct {
	Request consumergroup.HeartbeatRequest
	Reply   func(code int16)
}

// Fail answers a Heartbeat whose handling panicked.
func (m *Heartbeat) Fail(any) { m.Reply(-1) }

// LeaveGroup removes members (by member id or group.instance.id).
type LeaveGroup struct {
	Members []consumergroup.LeaveMember
	Reply   func(code int16, results []consumergroup.LeaveResult)
}

// Fail answers a LeaveGroup whose handling panicked.
func (m *LeaveGroup) Fail(any) { m.Reply(-1, nil) }

// CommitOffsets is an OffsetCommit, or with Transactional a
// TxnOffsetCommit (already verified with the transaction coordinator).
type CommitOffsets struct {
	Request       consumergroup.CommitRequest
	Transactional bool
	Reply         func(map[model.TopicPartition]int16)
}

// Fail answers a CommitOffsets whose handling panicked.
func (m *CommitOffsets) Fail(any) {
	out := make(map[model.TopicPartition]int16, len(m.Request.Offsets))
	for tp := range m.Request.Offsets {
		out[tp] = -1
	}
	m.Reply(out)
}

// FetchOffsets reads committed offsets (Partitions nil: all of them).
// OffsetFetch v9 may name a consumer group member and its epoch (nil and
// -1 otherwise); a group-level code answers for all partitions.
type FetchOffsets struct {
	Partitions    []model.TopicPartition
	RequireStable bool
	MemberID      *string
	MemberEpoch   int32
	Reply         func(code int16, offsets []consumergroup.FetchedOffset)
}

// Fail answers a FetchOffsets whose handling panicked.
func (m *FetchOffsets) Fail(any) { m.Reply(-1, nil) }

// ConsumerHeartbeat is a ConsumerGroupHeartbeat (KIP-848).
type ConsumerHeartbeat struct {
	Request consumergroup.ConsumerHeartbeatRequest
	Reply   func(consumergroup.ConsumerHeartbeatResult)
}

// Fail answers a ConsumerHeartbeat whose handling panicked.
func (m *ConsumerHeartbeat) Fail(any) { m.Reply(consumergroup.ConsumerHeartbeatResult{Err: -1}) }

// ConsumerDescribe asks for the group's ConsumerGroupDescribe answer.
type ConsumerDescribe struct {
	Reply func(consumergroup.ConsumerDescription)
}

// Fail answers a ConsumerDescribe whose handling panicked.
func (m *ConsumerDescribe) Fail(any) { m.Reply(consumergroup.ConsumerDescription{Err: -1}) }

// TopicsChanged tells a consumer group that topics were created (Created),
// deleted or grown, so it recomputes its subscriptions.
type TopicsChanged struct {
	Created bool
}

// DescribeGroup asks for the group's DescribeGroups answer.
type DescribeGroup struct {
	Reply func(consumergroup.Description)
}

// Fail answers a DescribeGroup whose handling panicked.
func (m *DescribeGroup) Fail(any) { m.Reply(consumergroup.Description{State: "Dead"}) }

// DeleteGroup is DeleteGroups for one group.
type DeleteGroup struct {
	Reply func(code int16)
}

// Fail answers a DeleteGroup whose handling panicked.
func (m *DeleteGroup) Fail(any) { m.Reply(-1) }

// DeleteOffsets is OffsetDelete.
type DeleteOffsets struct {
	Partitions []model.TopicPartition
	Reply      func(groupCode int16, codes map[model.TopicPartition]int16)
}

// Fail answers a DeleteOffsets whose handling panicked.
func (m *DeleteOffsets) Fail(any) { m.Reply(-1, nil) }

// RemovePartitions drops the group's offsets for partitions of a deleted
// topic.
type RemovePartitions struct {
	Partitions []model.TopicPartition
}

// ExpireOffsets runs the periodic offsets retention check.
type ExpireOffsets struct{}

// CompleteTxn applies a transaction marker that reached the group's slot
// log: commit or drop the producer's staged offsets. Done, if set, is
// called once applied.
type CompleteTxn struct {
	ProducerID int64
	Commit     bool
	Done       func()
}

// Fail still reports completion so the caller never waits forever.
func (m *CompleteTxn) Fail(any) {
	if m.Done != nil {
		m.Done()
	}
}

// UnloadGroup is sent at shutdown: parked JoinGroup and SyncGroup calls
// are answered NOT_COORDINATOR (Apache's onGroupUnloaded) and the group
// takes no more requests. Done is called once that is done.
type UnloadGroup struct {
	Done func()
}

// Fail still reports completion.
func (m *UnloadGroup) Fail(any) { m.Done() }
