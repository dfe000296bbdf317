package consumergroup

import (
	"cmp"
	"slices"
	"strings"
)

// assignUniformHeterogeneous is Apache's
// UniformHeterogeneousAssignmentBuilder, for members subscribed to
// different topics: every member keeps the partitions of topics it still
// subscribes to; unassigned partitions go, topic by topic, to the least
// loaded subscriber; then partitions move from the most to the least
// loaded subscribers of each topic until no two differ by more than one
// (or 16 rounds pass).
func assignUniformHeterogeneous(spec *groupSpec) map[string]Assignment {
	b := &heteroBuilder{spec: spec, subscribers: map[TopicID][]int{}, owners: map[TopicID][]int{}}
	b.sizes = make([]int, len(spec.members))
	subscribed := map[TopicID]bool{}
	for i, m := range spec.members {
		for id := range m.topics {
			subscribed[id] = true
			b.subscribers[id] = append(b.subscribers[id], i)
		}
	}
	if len(subscribed) == 0 {
		return map[string]Assignment{}
	}
	for id := range subscribed {
		owners := make([]int, spec.partitions[id])
		for p := range owners {
			owners[p] = -1
		}
		b.owners[id] = owners
	}

	// Keep what is still subscribed.
	b.target = make([]Assignment, len(spec.members))
	for i, m := range spec.members {
		a := Assignment{}
		for id, ps := range m.current {
			if !m.topics[id] {
				continue
			}
			for _, p := range ps {
				if p < spec.partitions[id] {
					a[id] = append(a[id], p)
					b.owners[id][p] = i
					b.sizes[i]++
				}
			}
		}
		b.target[i] = a
	}

	// Assign the rest to the least loaded subscribers.
	unassigned := map[TopicID][]int32{}
	for id := range subscribed {
		for p, o := range b.owners[id] {
			if o == -1 {
				unassigned[id] = append(unassigned[id], int32(p))
			}
		}
	}
	bal := &memberBalancer{b: b}
	for _, id := range b.sortTopics(mapKeys(unassigned)) {
		bal.initialize(b.subscribers[id])
		for _, p := range unassigned[id] {
			b.assignPartition(id, p, bal.nextLeastLoaded())
		}
	}

	// Balance the topics with more than one subscriber.
	var movable []TopicID
	for id := range subscribed {
		if len(b.subscribers[id]) >= 2 {
			movable = append(movable, id)
		}
	}
	if len(movable) > 0 {
		b.balanceTopics(movable)
	}

	out := make(map[string]Assignment, len(spec.members))
	for i, m := range spec.members {
		out[m.id] = b.target[i]
	}
	return out
}

type heteroBuilder struct {
	spec        *groupSpec
	subscribers map[TopicID][]int // member indices, ascending
	owners      map[TopicID][]int // partition → member index, -1 unowned
	target      []Assignment
	sizes       []int
}

func mapKeys(m map[TopicID][]int32) []TopicID {
	out := make([]TopicID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sortTopics orders topics as Apache's topicComparator: most partitions
// per subscriber first, then fewer subscribers, then topic id.
func (b *heteroBuilder) sortTopics(ids []TopicID) []TopicID {
	slices.SortFunc(ids, func(x, y TopicID) int {
		px, py := float64(b.spec.partitions[x]), float64(b.spec.partitions[y])
		sx, sy := len(b.subscribers[x]), len(b.subscribers[y])
		if c := cmp.Compare(py/float64(sy), px/float64(sx)); c != 0 {
			return c
		}
		if c := cmp.Compare(sx, sy); c != 0 {
			return c
		}
		return strings.Compare(string(x[:]), string(y[:]))
	})
	return ids
}

func (b *heteroBuilder) assignPartition(id TopicID, p int32, member int) {
	if old := b.owners[id][p]; old != -1 {
		b.target[old].remove(id, p)
		b.sizes[old]--
	}
	b.target[member].add(id, p)
	b.owners[id][p] = member
	b.sizes[member]++
}

// balanceTopics rebalances topic after topic until a full pass moves
// nothing, at most 16 passes (Apache's MAX_ITERATION_COUNT).
func (b *heteroBuilder) balanceTopics(ids []TopicID) {
	sorted := b.sortTopics(ids)
	last := -1
	bal := &memberBalancer{b: b}
	for iter := 0; iter < 16; iter++ {
		for i, id := range sorted {
			if i == last {
				return
			}
			if moved := b.balanceTopic(id, bal); moved > 0 || last == -1 {
				last = i
			}
		}
	}
}

// balanceTopic moves partitions of one topic from its most to its least
// loaded subscribers (by total assignment size) while they differ by more
// than one; it returns how many moved.
func (b *heteroBuilder) balanceTopic(id TopicID, bal *memberBalancer) int {
	if bal.initialize(b.subscribers[id]) <= 1 {
		return 0
	}
	owners := b.owners[id]
	n := len(owners)
	parts := make([]int32, n)
	for p := range parts {
		parts[p] = int32(p)
	}
	slices.SortFunc(parts, func(x, y int32) int {
		if c := cmp.Compare(owners[x], owners[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	start, end := map[int]int{}, map[int]int{}
	for i, p := range parts {
		o := owners[p]
		if _, ok := start[o]; !ok {
			start[o] = i
		}
		end[o] = i + 1
	}
	moved := 0
	for !bal.isBalanced() {
		most := -1
		for {
			most = bal.nextMostLoaded()
			if most == -1 {
				break
			}
			if e, ok := end[most]; !ok || e-start[most] <= 0 {
				bal.excludeMostLoaded()
				continue
			}
			break
		}
		if most == -1 {
			break
		}
		p := parts[end[most]-1]
		end[most]--
		least := bal.nextLeastLoaded()
		if bal.isBalanced() {
			break
		}
		b.assignPartition(id, p, least)
		moved++
	}
	return moved
}

// memberBalancer is Apache's MemberAssignmentBalancer: it hands out the
// least and most loaded members of a topic's subscribers in turn, tracking
// ranges of members with equal sizes as partitions move.
type memberBalancer struct {
	b      *heteroBuilder
	sorted []int

	leastEnd, leastCount, nextLeast int
	mostStart, mostEnd, mostCount   int
	nextMost                        int
}

// initialize sorts members by size and returns the spread between the
// most and the least loaded.
func (m *memberBalancer) initialize(members []int) int {
	sizes := m.b.sizes
	m.sorted = append(m.sorted[:0], members...)
	slices.SortFunc(m.sorted, func(x, y int) int {
		if c := cmp.Compare(sizes[x], sizes[y]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	n := len(m.sorted)
	m.leastEnd, m.leastCount, m.nextLeast = 0, sizes[m.sorted[0]]-1, 0
	m.mostStart, m.mostEnd, m.mostCount, m.nextMost = n, n, sizes[m.sorted[n-1]]+1, n-1
	return sizes[m.sorted[n-1]] - sizes[m.sorted[0]]
}

func (m *memberBalancer) nextLeastLoaded() int {
	sizes := m.b.sizes
	if m.nextLeast >= m.leastEnd {
		m.leastCount++
		for m.leastEnd < len(m.sorted) && sizes[m.sorted[m.leastEnd]] == m.leastCount {
			m.leastEnd++
		}
		m.nextLeast = 0
	}
	i := m.sorted[m.nextLeast]
	m.nextLeast++
	return i
}

func (m *memberBalancer) nextMostLoaded() int {
	sizes := m.b.sizes
	if m.nextMost < m.mostStart {
		if m.mostEnd <= m.mostStart && m.mostStart > 0 {
			m.mostCount = sizes[m.sorted[m.mostStart-1]]
		} else {
			m.mostCount--
		}
		for m.mostStart > 0 && sizes[m.sorted[m.mostStart-1]] == m.mostCount {
			m.mostStart--
		}
		m.nextMost = m.mostEnd - 1
	}
	if m.nextMost < 0 {
		return -1
	}
	i := m.sorted[m.nextMost]
	m.nextMost--
	return i
}

func (m *memberBalancer) excludeMostLoaded() {
	i := m.sorted[m.nextMost+1]
	m.sorted[m.nextMost+1] = m.sorted[m.mostEnd-1]
	m.sorted[m.mostEnd-1] = i
	m.mostEnd--
}

func (m *memberBalancer) isBalanced() bool { return m.mostCount-m.leastCount <= 1 }
