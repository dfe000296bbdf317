package sharegroup

import (
	"maps"
	"slices"
)

// simpleAssign is the share groups' "simple" assignor (Apache's
// SimpleAssignor, KIP-932), per subscribed topic with N members (sorted
// by id) and P partitions: with N ≤ P every partition goes to one member,
// round robin (member i gets partitions i, i+N, ...); with N > P every
// member gets one partition (member i gets i mod P), so each partition is
// shared by ⌈N/P⌉ or ⌊N/P⌋ members. Deterministic, not sticky — unlike a
// consumer group's, a share group's move costs nothing to hand over.
// Apache's assignor differs in which member lands where; what it shares
// with this one is the shape: every partition covered, the load even.
func simpleAssign(members map[string]*Member, topics Topics) map[string]map[TopicID][]int32 {
	out := make(map[string]map[TopicID][]int32, len(members))
	subs := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(members)) {
		out[id] = map[TopicID][]int32{}
		for _, t := range members[id].Subscribed {
			subs[t] = append(subs[t], id)
		}
	}
	for topic, ids := range subs {
		tid, parts, ok := topics.ByName(topic)
		if !ok || parts <= 0 {
			continue
		}
		n, p := int32(len(ids)), parts
		if n <= p {
			for part := int32(0); part < p; part++ {
				id := ids[part%n]
				out[id][tid] = append(out[id][tid], part)
			}
			continue
		}
		for i, id := range ids {
			out[id][tid] = []int32{int32(i) % p}
		}
	}
	return out
}

func equalTargets(a, b map[string]map[TopicID][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y map[TopicID][]int32) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]int32])
	})
}
