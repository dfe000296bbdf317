package messages

import (
	"kaas/state/consumergroup"

	"kaas/model"
)

// The group messages a broker can answer when the group's actor is gone
// or unloaded (system.Undeliverable): its offsets slot was handed to
// another broker (or the broker is stopping), so the request is answered
// NOT_COORDINATOR — the client finds the new coordinator at once —
// instead of being dropped, which would leave it to the client's timeout
// and stall its connection's in-order replies.

func (m *JoinGroup) NotLeader() {
	m.Reply(consumergroup.JoinResult{Err: notCoordinator, MemberID: m.Request.MemberID, Generation: -1})
}
func (m *SyncGroup) NotLeader()  { m.Reply(consumergroup.SyncResult{Err: notCoordinator}) }
func (m *Heartbeat) NotLeader()  { m.Reply(notCoordinator) }
func (m *LeaveGroup) NotLeader() { m.Reply(notCoordinator, nil) }
func (m *CommitOffsets) NotLeader() {
	out := make(map[model.TopicPartition]int16, len(m.Request.Offsets))
	for tp := range m.Request.Offsets {
		out[tp] = notCoordinator
	}
	m.Reply(out)
}
func (m *FetchOffsets) NotLeader() { m.Reply(notCoordinator, nil) }
func (m *ConsumerHeartbeat) NotLeader() {
	m.Reply(consumergroup.ConsumerHeartbeatResult{Err: notCoordinator})
}
func (m *ConsumerDescribe) NotLeader() {
	m.Reply(consumergroup.ConsumerDescription{Err: notCoordinator})
}
func (m *DeleteGroup) NotLeader()   { m.Reply(notCoordinator) }
func (m *DeleteOffsets) NotLeader() { m.Reply(notCoordinator, nil) }

// NotLeader settles a marker's completion for a group no longer here: the
// marker is in the slot's log, where the next owner reads it.
func (m *CompleteTxn) NotLeader() { m.Fail(nil) }

// NotLeader reports an unload that had nothing left to do.
func (m *UnloadGroup) NotLeader() { m.Done() }
