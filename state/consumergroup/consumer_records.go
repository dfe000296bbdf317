package consumergroup

import (
	"maps"
	"slices"

	"kaas/storage/offsetlog"
)

// The records a consumer group writes, from its in-memory state
// (Apache's GroupCoordinatorRecordHelpers for consumer groups).

func (g *Group) memberRecord(m *ConsumerMember) offsetlog.Record {
	v := &offsetlog.ConsumerMember{
		InstanceID: m.InstanceID, RackID: m.RackID, ClientID: m.ClientID, ClientHost: m.ClientHost,
		SubscribedTopicNames: slices.Clone(m.SubscribedTopicNames), RebalanceTimeoutMs: m.RebalanceTimeoutMs,
	}
	if v.SubscribedTopicNames == nil {
		v.SubscribedTopicNames = []string{}
	}
	if m.SubscribedTopicRegex != "" {
		re := m.SubscribedTopicRegex
		v.SubscribedTopicRegex = &re
	}
	if m.ServerAssignor != "" {
		a := m.ServerAssignor
		v.ServerAssignor = &a
	}
	if c := m.Classic; c != nil {
		v.Classic = &offsetlog.ClassicMember{SessionTimeoutMs: c.SessionTimeoutMs}
		for _, p := range c.Protocols {
			v.Classic.Protocols = append(v.Classic.Protocols, offsetlog.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
		}
	}
	return offsetlog.ConsumerMemberRecord(g.id, m.ID, v)
}

func (g *Group) currentAssignmentRecord(m *ConsumerMember) offsetlog.Record {
	return offsetlog.ConsumerAssignmentRecord(g.id, m.ID, &offsetlog.ConsumerAssignment{
		MemberEpoch: m.Epoch, PreviousMemberEpoch: m.PreviousEpoch, State: int8(m.State),
		Assigned: m.Assigned.toLog(), PendingRevocation: m.PendingRevocation.toLog(),
	})
}

func (g *Group) epochRecord(epoch int32) offsetlog.Record {
	return offsetlog.ConsumerEpochRecord(g.id, &epoch)
}

func (g *Group) subscriptionRecord(sub map[string]offsetlog.ConsumerTopic) offsetlog.Record {
	names := slices.Sorted(maps.Keys(sub))
	topics := make([]offsetlog.ConsumerTopic, 0, len(names))
	for _, n := range names {
		topics = append(topics, sub[n])
	}
	return offsetlog.ConsumerSubscriptionRecord(g.id, topics, false)
}

// removeMemberRecords are the tombstones of one member, in Apache's order
// (removeMember).
func (g *Group) removeMemberRecords(id string) []offsetlog.Record {
	return []offsetlog.Record{
		offsetlog.ConsumerAssignmentRecord(g.id, id, nil),
		offsetlog.ConsumerTargetRecord(g.id, id, nil, true),
		offsetlog.ConsumerMemberRecord(g.id, id, nil),
	}
}

// consumerTombstones delete the whole consumer group (not its offsets).
func (g *Group) consumerTombstones() []offsetlog.Record {
	cg := g.cg
	c := &offsetlog.ConsumerState{
		Members: map[string]*offsetlog.ConsumerMember{}, Targets: map[string][]offsetlog.TopicPartitions{},
		Current: map[string]*offsetlog.ConsumerAssignment{}, Regexes: map[string]*offsetlog.ConsumerRegex{},
	}
	for id := range cg.members {
		c.Members[id], c.Current[id] = nil, nil
	}
	for id := range cg.target {
		c.Targets[id] = nil
	}
	for re := range cg.regexes {
		c.Regexes[re] = nil
	}
	return offsetlog.ConsumerGroupTombstones(g.id, c)
}
