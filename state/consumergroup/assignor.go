package consumergroup

import (
	"fmt"
	"slices"
	"strings"
)

// Server-side assignors (group.consumer.assignors): Apache 4.0's uniform
// (the default) and range. Both see the group as a GroupSpec — each
// member's subscribed topic ids and current target — and the partition
// count of every subscribed topic, and return every member's new target.

// The assignor names, as members ask for them in ServerAssignor.
const (
	UniformAssignor = "uniform"
	RangeAssignor   = "range"
)

// assignorClasses maps Apache's class names in group.consumer.assignors to
// the assignors kaas has.
var assignorClasses = map[string]string{
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor": UniformAssignor,
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":   RangeAssignor,
}

// ParseAssignors reads group.consumer.assignors: a comma-separated list
// of assignor names or Apache's class names for them, the first one the
// default.
func ParseAssignors(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			continue
		}
		if n, ok := assignorClasses[name]; ok {
			name = n
		}
		if name != UniformAssignor && name != RangeAssignor {
			return nil, fmt.Errorf("unknown consumer group assignor %q (kaas has %s and %s)", part, UniformAssignor, RangeAssignor)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("group.consumer.assignors is empty")
	}
	return out, nil
}

// memberSpec is one member as an assignor sees it.
type memberSpec struct {
	id         string
	instanceID *string
	topics     map[TopicID]bool // subscribed topics that exist
	current    Assignment       // current target assignment
}

// groupSpec is the group as an assignor sees it; members are in id order.
type groupSpec struct {
	members     []*memberSpec
	homogeneous bool
	partitions  map[TopicID]int32 // subscribed topics' partition counts
}

// assign runs the named assignor.
func assign(name string, spec *groupSpec) (map[string]Assignment, error) {
	if len(spec.members) == 0 {
		return map[string]Assignment{}, nil
	}
	if name == RangeAssignor {
		return assignRange(spec), nil
	}
	if spec.homogeneous {
		return assignUniformHomogeneous(spec)
	}
	return assignUniformHeterogeneous(spec), nil
}

// sortedTopicIDs lists topic ids in byte order.
func sortedTopicIDs(set map[TopicID]bool) []TopicID {
	out := make([]TopicID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b TopicID) int { return strings.Compare(string(a[:]), string(b[:])) })
	return out
}

// assignRange is Apache's RangeAssignor: per topic, contiguous ranges of
// partitions to its subscribers in order (static members first, by
// instance id, then the rest by member id); the first ones get one extra
// while partitions do not divide evenly. With every member subscribed to
// the same topics of equal size, members get the same partition numbers
// of every topic (co-partitioning).
func assignRange(spec *groupSpec) map[string]Assignment {
	members := slices.Clone(spec.members)
	slices.SortFunc(members, func(a, b *memberSpec) int {
		switch {
		case a.instanceID != nil && b.instanceID != nil:
			return strings.Compare(*a.instanceID, *b.instanceID)
		case a.instanceID != nil:
			return -1
		case b.instanceID != nil:
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	type topicState struct {
		partitions, members, minQuota, extra, next int32
	}
	topics := map[TopicID]*topicState{}
	for _, m := range members {
		for id := range m.topics {
			t := topics[id]
			if t == nil {
				t = &topicState{partitions: spec.partitions[id]}
				topics[id] = t
			}
			t.members++
		}
	}
	for _, t := range topics {
		t.minQuota, t.extra = t.partitions/t.members, t.partitions%t.members
	}
	out := make(map[string]Assignment, len(members))
	for _, m := range members {
		a := Assignment{}
		for _, id := range sortedTopicIDs(m.topics) {
			t := topics[id]
			quota := t.minQuota
			if t.extra > 0 {
				quota++
				t.extra--
			}
			end := min(t.next+quota, t.partitions)
			for p := t.next; p < end; p++ {
				a[id] = append(a[id], p)
			}
			t.next = end
		}
		out[m.id] = a
	}
	return out
}

// assignUniformHomogeneous is Apache's UniformHomogeneousAssignmentBuilder
// for members all subscribed to the same topics: balance first (sizes
// differ by at most one), then stickiness. Each member keeps what it has
// up to its quota; what is left over, new or unowned goes to the members
// below quota, in order.
func assignUniformHomogeneous(spec *groupSpec) (map[string]Assignment, error) {
	subscribed := spec.members[0].topics
	if len(subscribed) == 0 {
		return map[string]Assignment{}, nil
	}
	owner := map[TopicID]map[int32]bool{}
	for _, m := range spec.members {
		for id, ps := range m.current {
			if owner[id] == nil {
				owner[id] = map[int32]bool{}
			}
			for _, p := range ps {
				owner[id][p] = true
			}
		}
	}
	type tp struct {
		id TopicID
		p  int32
	}
	var unassigned []tp
	total := 0
	for _, id := range sortedTopicIDs(subscribed) {
		n := spec.partitions[id]
		for p := int32(0); p < n; p++ {
			if !owner[id][p] {
				unassigned = append(unassigned, tp{id, p})
			}
		}
		total += int(n)
	}
	minQuota, extra := total/len(spec.members), total%len(spec.members)
	type unfilled struct {
		id    string
		quota int
	}
	var need []unfilled
	out := make(map[string]Assignment, len(spec.members))
	for _, m := range spec.members {
		quota := minQuota
		if extra > 0 {
			quota++
			extra--
		}
		a := Assignment{}
		for _, id := range m.current.sortedIDs() {
			ps := m.current[id]
			if !subscribed[id] {
				continue // the whole topic goes
			}
			for _, p := range ps {
				if p >= spec.partitions[id] {
					continue // the topic shrank (a recreated topic)
				}
				if quota > 0 {
					a[id] = append(a[id], p)
					quota--
				} else {
					unassigned = append(unassigned, tp{id, p})
				}
			}
		}
		if quota > 0 {
			need = append(need, unfilled{m.id, quota})
		}
		out[m.id] = a
	}
	i := 0
	for _, u := range need {
		for q := 0; q < u.quota && i < len(unassigned); q++ {
			out[u.id].add(unassigned[i].id, unassigned[i].p)
			i++
		}
	}
	if i < len(unassigned) {
		return nil, fmt.Errorf("%d partitions were left unassigned", len(unassigned)-i)
	}
	return out, nil
}
