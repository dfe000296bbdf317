package consumergroup

import (
	"maps"
	"slices"

	"kaas/storage/offsetlog"
)

// computeSubscription is the subscription metadata for the subscribed
// topic names: each one that exists, with its id and partition count
// (Apache's computeSubscriptionMetadata).
func (g *Group) computeSubscription(names map[string]int) map[string]offsetlog.ConsumerTopic {
	topics := g.env.Topics()
	out := make(map[string]offsetlog.ConsumerTopic, len(names))
	for name := range names {
		if id, n, ok := topics.ByName(name); ok {
			out[name] = offsetlog.ConsumerTopic{ID: id, Name: name, Partitions: n}
		}
	}
	return out
}

func equalSubscriptions(a, b map[string]offsetlog.ConsumerTopic) bool {
	return maps.Equal(a, b)
}

// computeTarget is Apache's updateTargetAssignment and
// TargetAssignmentBuilder: the target assignment of every member for
// epoch, with updated replacing its current version (or joining) and
// replaced (a static member it takes over) gone. It stores the new
// targets and returns the records for the ones that changed, then the
// target epoch's.
func (g *Group) computeTarget(epoch int32, updated *ConsumerMember, replaced string) ([]offsetlog.Record, error) {
	cg := g.cg
	members := maps.Clone(cg.members)
	if replaced != "" {
		delete(members, replaced)
	}
	if updated != nil {
		members[updated.ID] = updated
	}
	assignor := preferredAssignor(members)
	if assignor == "" {
		assignor = g.cfg.ConsumerAssignors[0]
	}
	byID := map[TopicID]int32{}
	for _, t := range cg.subscription {
		byID[t.ID] = t.Partitions
	}
	spec := &groupSpec{partitions: byID, homogeneous: true}
	var first map[TopicID]bool
	for _, id := range slices.Sorted(maps.Keys(members)) {
		m := members[id]
		current := cg.target[id]
		if current == nil && replaced != "" && updated != nil && id == updated.ID {
			current = cg.target[replaced]
		}
		ms := &memberSpec{id: id, instanceID: m.InstanceID, topics: g.memberTopicIDs(m), current: current}
		if first == nil {
			first = ms.topics
		} else if !maps.Equal(first, ms.topics) {
			spec.homogeneous = false
		}
		spec.members = append(spec.members, ms)
	}
	result, err := assign(assignor, spec)
	if err != nil {
		return nil, err
	}
	var recs []offsetlog.Record
	newTarget := make(map[string]Assignment, len(members))
	for _, ms := range spec.members {
		a := result[ms.id]
		if a == nil {
			a = Assignment{}
		}
		newTarget[ms.id] = a
		if old, ok := cg.target[ms.id]; !ok || !old.equal(a) {
			recs = append(recs, offsetlog.ConsumerTargetRecord(g.id, ms.id, a.toLog(), false))
		}
	}
	recs = append(recs, offsetlog.ConsumerTargetEpochRecord(g.id, &epoch))
	cg.target = newTarget
	cg.assignmentEpoch = epoch
	g.log.Info("computed a new target assignment", "epoch", epoch, "assignor", assignor, "members", len(members), "homogeneous", spec.homogeneous)
	return recs, nil
}

// memberTopicIDs is the set of topics a member reads that are in the
// subscription metadata: named ones and those its regex resolved to.
func (g *Group) memberTopicIDs(m *ConsumerMember) map[TopicID]bool {
	cg := g.cg
	out := map[TopicID]bool{}
	for _, name := range m.SubscribedTopicNames {
		if t, ok := cg.subscription[name]; ok {
			out[t.ID] = true
		}
	}
	if m.SubscribedTopicRegex != "" {
		if r := cg.regexes[m.SubscribedTopicRegex]; r != nil {
			for _, name := range r.topics {
				if t, ok := cg.subscription[name]; ok {
					out[t.ID] = true
				}
			}
		}
	}
	return out
}
