package consumergroup

import (
	"slices"

	"kaas/storage/offsetlog"
)

// ConsumerDescription is a ConsumerGroupDescribe answer for one group.
type ConsumerDescription struct {
	Err             int16
	State           string
	Epoch           int32
	AssignmentEpoch int32
	AssignorName    string
	Members         []ConsumerDescribedMember
}

// ConsumerDescribedMember is one member in a ConsumerDescription.
type ConsumerDescribedMember struct {
	MemberID             string
	InstanceID           *string
	RackID               *string
	MemberEpoch          int32
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	Assignment           []DescribedTopic
	TargetAssignment     []DescribedTopic
	// Classic: the member uses the classic protocol (v1's MemberType 0;
	// 1 is the consumer protocol).
	Classic bool
}

// DescribedTopic is an assignment's partitions of one topic, named.
type DescribedTopic struct {
	ID         TopicID
	Name       string
	Partitions []int32
}

// ConsumerDescribe is the group's ConsumerGroupDescribe answer (Apache's
// asDescribedGroup): GROUP_ID_NOT_FOUND unless it is a consumer group.
// Topics that no longer exist are left out of the assignments, as Apache
// leaves out topics missing from its metadata image.
func (g *Group) ConsumerDescribe() ConsumerDescription {
	cg := g.cg
	if cg == nil || g.state == Dead {
		return ConsumerDescription{Err: errGroupIDNotFound}
	}
	d := ConsumerDescription{State: cg.state.String(), Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, AssignorName: preferredAssignor(cg.members)}
	if d.AssignorName == "" {
		d.AssignorName = g.cfg.ConsumerAssignors[0]
	}
	topics := g.env.Topics()
	named := func(a Assignment) []DescribedTopic {
		out := []DescribedTopic{}
		for _, id := range a.sortedIDs() {
			if name, ok := topics.ByID(id); ok {
				out = append(out, DescribedTopic{ID: id, Name: name, Partitions: slices.Clone(a[id])})
			}
		}
		return out
	}
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		dm := ConsumerDescribedMember{
			MemberID: id, InstanceID: m.InstanceID, RackID: m.RackID, MemberEpoch: m.Epoch,
			ClientID: m.ClientID, ClientHost: m.ClientHost, SubscribedTopicNames: slices.Clone(m.SubscribedTopicNames),
			Assignment: named(m.Assigned), TargetAssignment: named(cg.target[id]), Classic: m.Classic != nil,
		}
		if dm.SubscribedTopicNames == nil {
			dm.SubscribedTopicNames = []string{}
		}
		if m.SubscribedTopicRegex != "" {
			re := m.SubscribedTopicRegex
			dm.SubscribedTopicRegex = &re
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// TopicsChanged tells a consumer group that topics were created, deleted
// or grown (Apache's onNewMetadataImage): its next heartbeat recomputes
// the subscription metadata, and with created topics its regexes too.
func (g *Group) TopicsChanged(created bool) {
	if g.cg == nil {
		return
	}
	g.cg.metadataStale = true
	if created {
		g.cg.newTopics = true
	}
}

// ConsumerMemberSummary is one consumer group member for the inspector.
type ConsumerMemberSummary struct {
	Epoch             int32  `json:"member_epoch"`
	State             string `json:"member_state"`
	Assigned          int    `json:"assigned_partitions"`
	PendingRevocation int    `json:"pending_revocation"`
	Target            int    `json:"target_partitions"`
	Subscription      string `json:"subscription"`
	// Protocol is "consumer", or "classic" for a member that joined
	// through JoinGroup (online migration).
	Protocol string `json:"protocol"`
}

// consumerSummary fills the consumer group parts of a Summary.
func (g *Group) consumerSummary(s *Summary) {
	cg := g.cg
	s.Type = "consumer"
	s.State = cg.state.String()
	if g.state == Dead {
		s.State = ConsumerDead.String()
	}
	s.ProtocolType = ConsumerProtocolType
	s.Generation = cg.epoch
	s.AssignmentEpoch = cg.assignmentEpoch
	s.Protocol = preferredAssignor(cg.members)
	if s.Protocol == "" {
		s.Protocol = g.cfg.ConsumerAssignors[0]
	}
	for _, id := range cg.sortedMemberIDs() {
		m := cg.members[id]
		sub := m.SubscribedTopicRegex
		if sub == "" {
			sub = joinNames(m.SubscribedTopicNames)
		}
		s.Members = append(s.Members, MemberSummary{
			MemberID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			Consumer: &ConsumerMemberSummary{Epoch: m.Epoch, State: m.State.String(), Assigned: m.Assigned.count(),
				PendingRevocation: m.PendingRevocation.count(), Target: cg.target[id].count(), Subscription: sub, Protocol: memberProtocol(m)},
		})
	}
}

func memberProtocol(m *ConsumerMember) string {
	if m.Classic != nil {
		return "classic"
	}
	return "consumer"
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}

// Load's counterpart for consumer groups: a group whose log holds
// consumer records is a consumer group, its members' sessions restarted
// (Apache schedules every member's session timeout on load, so members
// that come back within it resume where they were, without a rebalance).
func (g *Group) loadConsumer(c *offsetlog.ConsumerState) {
	g.cg = loadConsumerGroup(c)
	g.protocolType = ConsumerProtocolType
	for _, m := range g.cg.members {
		g.scheduleConsumerSession(m)
		if m.State == MemberUnrevokedPartitions {
			g.scheduleConsumerRebalance(m)
		}
	}
	g.cg.metadataStale = true // topics may have changed while down
}
