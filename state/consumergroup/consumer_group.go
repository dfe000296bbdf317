package consumergroup

import (
	"bytes"
	"slices"
	"sort"

	"kaas/storage/offsetlog"
)

// consumerGroup is the KIP-848 state of a group (Apache's ConsumerGroup).
type consumerGroup struct {
	// epoch is the group epoch, bumped whenever the target assignment
	// must be computed again (a member joins, leaves or changes its
	// subscription; the subscribed topics change).
	epoch int32
	// assignmentEpoch is the epoch the target assignment was computed
	// for; below epoch while the group is Assigning.
	assignmentEpoch int32
	members         map[string]*ConsumerMember
	static          map[string]string // instance id → member id
	target          map[string]Assignment
	// partitionEpochs says, for every partition a member holds or has
	// yet to revoke, the holder's epoch: a partition is only given to
	// its next owner once it is gone from here.
	partitionEpochs map[TopicID]map[int32]int32
	// subscription is the subscription metadata: each subscribed topic
	// that exists, with its id and partition count.
	subscription map[string]offsetlog.ConsumerTopic
	// metadataStale: topics changed since subscription was computed.
	metadataStale bool
	regexes       map[string]*resolvedRegex
	// regexRefreshMs is when the regexes were last resolved.
	regexRefreshMs int64
	// newTopics: topics were created since the last resolution.
	newTopics bool
	state     ConsumerGroupState
}

// ConsumerMember is a member of a consumer group (Apache's
// ConsumerGroupMember).
type ConsumerMember struct {
	ID                   string
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string // sorted
	SubscribedTopicRegex string   // "" for none
	ServerAssignor       string   // "" for none
	RebalanceTimeoutMs   int32
	// Classic is set for a member that uses the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) inside the consumer
	// group: Apache's ClassicMemberMetadata.
	Classic *ClassicMeta

	Epoch             int32
	PreviousEpoch     int32
	State             MemberState
	Assigned          Assignment
	PendingRevocation Assignment

	sessionCancel   func()
	sessionToken    uint64
	rebalanceCancel func()
	rebalanceToken  uint64
	// A classic member's join timeout (it was told to rejoin) and sync
	// timeout (it joined and must sync), both its rebalance timeout.
	joinCancel func()
	joinToken  uint64
	syncCancel func()
	syncToken  uint64
}

// ClassicMeta is what a classic member declared in its last JoinGroup.
// Never modified once built (members are copied, not changed).
type ClassicMeta struct {
	SessionTimeoutMs int32
	Protocols        []Protocol // in the member's order of preference
}

func (c *ClassicMeta) equal(o *ClassicMeta) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.SessionTimeoutMs == o.SessionTimeoutMs && slices.EqualFunc(c.Protocols, o.Protocols, func(a, b Protocol) bool {
		return a.Name == b.Name && bytes.Equal(a.Metadata, b.Metadata)
	})
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*ConsumerMember{}, static: map[string]string{}, target: map[string]Assignment{},
		partitionEpochs: map[TopicID]map[int32]int32{}, subscription: map[string]offsetlog.ConsumerTopic{},
		regexes: map[string]*resolvedRegex{},
	}
}

// copyMember is the next version of m: its fields may change without
// touching m (assignments are replaced, never modified in place), and it
// inherits m's timers.
func (m *ConsumerMember) copyMember() *ConsumerMember {
	c := *m
	return &c
}

// isReconciledTo: the member owns exactly the target of epoch.
func (m *ConsumerMember) isReconciledTo(epoch int32) bool {
	return m.State == MemberStable && m.Epoch == epoch
}

// sameMetadata compares what a ConsumerGroupMemberMetadata record holds.
func (m *ConsumerMember) sameMetadata(o *ConsumerMember) bool {
	return m.ID == o.ID && eqStrPtr(m.InstanceID, o.InstanceID) && eqStrPtr(m.RackID, o.RackID) &&
		m.ClientID == o.ClientID && m.ClientHost == o.ClientHost &&
		slices.Equal(m.SubscribedTopicNames, o.SubscribedTopicNames) && m.SubscribedTopicRegex == o.SubscribedTopicRegex &&
		m.ServerAssignor == o.ServerAssignor && m.RebalanceTimeoutMs == o.RebalanceTimeoutMs && m.Classic.equal(o.Classic)
}

// sameAssignment compares what a ConsumerGroupCurrentMemberAssignment
// record holds.
func (m *ConsumerMember) sameAssignment(o *ConsumerMember) bool {
	return m.Epoch == o.Epoch && m.PreviousEpoch == o.PreviousEpoch && m.State == o.State &&
		m.Assigned.equal(o.Assigned) && m.PendingRevocation.equal(o.PendingRevocation)
}

func eqStrPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (cg *consumerGroup) isEmpty() bool { return len(cg.members) == 0 }

// updateState is Apache's maybeUpdateGroupState.
func (cg *consumerGroup) updateState() {
	switch {
	case len(cg.members) == 0:
		cg.state = ConsumerEmpty
	case cg.epoch > cg.assignmentEpoch:
		cg.state = ConsumerAssigning
	default:
		cg.state = ConsumerStable
		for _, m := range cg.members {
			if !m.isReconciledTo(cg.assignmentEpoch) {
				cg.state = ConsumerReconciling
				break
			}
		}
	}
}

// currentPartitionEpoch is the epoch of the partition's holder, or -1 if
// it is free.
func (cg *consumerGroup) currentPartitionEpoch(id TopicID, p int32) int32 {
	if e, ok := cg.partitionEpochs[id][p]; ok {
		return e
	}
	return -1
}

func (cg *consumerGroup) addPartitionEpochs(a Assignment, epoch int32) {
	for id, ps := range a {
		m := cg.partitionEpochs[id]
		if m == nil {
			m = map[int32]int32{}
			cg.partitionEpochs[id] = m
		}
		for _, p := range ps {
			m[p] = epoch
		}
	}
}

func (cg *consumerGroup) removePartitionEpochs(a Assignment) {
	for id, ps := range a {
		m := cg.partitionEpochs[id]
		for _, p := range ps {
			delete(m, p)
		}
		if len(m) == 0 {
			delete(cg.partitionEpochs, id)
		}
	}
}

// putMember stores a new version of a member (Apache's updateMember):
// the partition epochs follow its assignment.
func (cg *consumerGroup) putMember(m *ConsumerMember) {
	if old := cg.members[m.ID]; old != nil {
		cg.removePartitionEpochs(old.Assigned)
		cg.removePartitionEpochs(old.PendingRevocation)
		if old.InstanceID != nil && (m.InstanceID == nil || *old.InstanceID != *m.InstanceID) {
			delete(cg.static, *old.InstanceID)
		}
	}
	cg.members[m.ID] = m
	if m.InstanceID != nil {
		cg.static[*m.InstanceID] = m.ID
	}
	cg.addPartitionEpochs(m.Assigned, m.Epoch)
	cg.addPartitionEpochs(m.PendingRevocation, m.Epoch)
}

// dropMember forgets a member, its target and its partitions.
func (cg *consumerGroup) dropMember(id string) {
	m := cg.members[id]
	if m == nil {
		return
	}
	cg.removePartitionEpochs(m.Assigned)
	cg.removePartitionEpochs(m.PendingRevocation)
	if m.InstanceID != nil && cg.static[*m.InstanceID] == id {
		delete(cg.static, *m.InstanceID)
	}
	delete(cg.members, id)
	delete(cg.target, id)
}

// staticMember is the member holding an instance id, or nil.
func (cg *consumerGroup) staticMember(instanceID string) *ConsumerMember {
	if id, ok := cg.static[instanceID]; ok {
		return cg.members[id]
	}
	return nil
}

// sortedMemberIDs lists the members in id order.
func (cg *consumerGroup) sortedMemberIDs() []string {
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// preferredAssignor is the server assignor most members ask for (ties:
// the first in name order), or "" when none asks.
func preferredAssignor(members map[string]*ConsumerMember) string {
	counts := map[string]int{}
	for _, m := range members {
		if m.ServerAssignor != "" {
			counts[m.ServerAssignor]++
		}
	}
	best, n := "", 0
	for name, c := range counts {
		if c > n || (c == n && name < best) {
			best, n = name, c
		}
	}
	return best
}

// isSubscribedTo reports whether some member reads topic (by name or
// through a resolved regex): Apache's isSubscribedToTopic.
func (cg *consumerGroup) isSubscribedTo(topic string) bool {
	_, ok := cg.subscribedTopicNames(nil, nil)[topic]
	return ok
}

// subscribedTopicNames counts the members reading each topic, with old
// replaced by updated (either may be nil): by name, and through the
// resolved regexes (Apache's computeSubscribedTopicNames).
func (cg *consumerGroup) subscribedTopicNames(old, updated *ConsumerMember) map[string]int {
	out := map[string]int{}
	regexes := map[string]int{}
	add := func(m *ConsumerMember, d int) {
		for _, t := range m.SubscribedTopicNames {
			out[t] += d
		}
		if m.SubscribedTopicRegex != "" {
			regexes[m.SubscribedTopicRegex] += d
		}
	}
	for _, m := range cg.members {
		add(m, 1)
	}
	if old != nil {
		add(old, -1)
	}
	if updated != nil {
		add(updated, 1)
	}
	for re, n := range regexes {
		if n <= 0 {
			continue
		}
		if r := cg.regexes[re]; r != nil {
			for _, t := range r.topics {
				out[t] += n
			}
		}
	}
	for t, n := range out {
		if n <= 0 {
			delete(out, t)
		}
	}
	return out
}

// loadConsumerGroup rebuilds the group's KIP-848 state from its records
// (Apache's replay of them, ending in onLoaded).
func loadConsumerGroup(c *offsetlog.ConsumerState) *consumerGroup {
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = c.Epoch, c.TargetEpoch
	for _, t := range c.Topics {
		cg.subscription[t.Name] = t
	}
	for re, r := range c.Regexes {
		cg.regexes[re] = &resolvedRegex{topics: slices.Clone(r.Topics), version: r.Version, timestampMs: r.TimestampMs}
		cg.regexRefreshMs = max(cg.regexRefreshMs, r.TimestampMs)
	}
	for id, mv := range c.Members {
		m := &ConsumerMember{
			ID: id, InstanceID: mv.InstanceID, RackID: mv.RackID, ClientID: mv.ClientID, ClientHost: mv.ClientHost,
			SubscribedTopicNames: slices.Clone(mv.SubscribedTopicNames), RebalanceTimeoutMs: mv.RebalanceTimeoutMs,
			Assigned: Assignment{}, PendingRevocation: Assignment{},
		}
		slices.Sort(m.SubscribedTopicNames)
		if mv.SubscribedTopicRegex != nil {
			m.SubscribedTopicRegex = *mv.SubscribedTopicRegex
		}
		if mv.ServerAssignor != nil {
			m.ServerAssignor = *mv.ServerAssignor
		}
		if c := mv.Classic; c != nil {
			m.Classic = &ClassicMeta{SessionTimeoutMs: c.SessionTimeoutMs}
			for _, p := range c.Protocols {
				m.Classic.Protocols = append(m.Classic.Protocols, Protocol{Name: p.Name, Metadata: p.Metadata})
			}
		}
		if a := c.Current[id]; a != nil {
			m.Epoch, m.PreviousEpoch, m.State = a.MemberEpoch, a.PreviousMemberEpoch, MemberState(a.State)
			switch m.State {
			case MemberStable, MemberUnrevokedPartitions, MemberUnreleasedPartitions:
			default:
				m.State = MemberUnknown
			}
			m.Assigned, m.PendingRevocation = assignmentOf(a.Assigned), assignmentOf(a.PendingRevocation)
		}
		cg.putMember(m)
	}
	for id, tps := range c.Targets {
		if cg.members[id] != nil {
			cg.target[id] = assignmentOf(tps)
		}
	}
	cg.updateState()
	return cg
}
