package consumergroup

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestAssignorsProperties runs both assignors on random groups, each from
// the previous round's targets: every subscribed partition is assigned to
// exactly one member that subscribes to it, the uniform assignor keeps
// homogeneous groups within one partition of each other, and range gives
// contiguous runs.
func TestAssignorsProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(848))
	topics := []TopicID{{1}, {2}, {3}, {4}}
	for round := 0; round < 300; round++ {
		partitions := map[TopicID]int32{}
		for _, id := range topics {
			partitions[id] = int32(1 + rng.Intn(12))
		}
		homogeneous := rng.Intn(2) == 0
		n := 1 + rng.Intn(8)
		spec := &groupSpec{partitions: partitions, homogeneous: homogeneous}
		all := map[TopicID]bool{}
		for _, id := range topics[:1+rng.Intn(len(topics))] {
			all[id] = true
		}
		prev := map[string]Assignment{}
		for i := 0; i < n; i++ {
			subs := all
			if !homogeneous {
				subs = map[TopicID]bool{}
				for _, id := range topics {
					if rng.Intn(2) == 0 {
						subs[id] = true
					}
				}
			}
			id := fmt.Sprintf("m%02d", i)
			var inst *string
			if rng.Intn(3) == 0 {
				s := fmt.Sprintf("i%02d", n-i)
				inst = &s
			}
			spec.members = append(spec.members, &memberSpec{id: id, instanceID: inst, topics: subs, current: Assignment{}})
		}
		for step := 0; step < 3; step++ {
			for _, name := range []string{UniformAssignor, RangeAssignor} {
				if name == UniformAssignor {
					for _, m := range spec.members {
						m.current = prev[m.id]
						if m.current == nil {
							m.current = Assignment{}
						}
					}
				}
				out, err := assign(name, spec)
				if err != nil {
					t.Fatalf("round %d %s: %v", round, name, err)
				}
				checkAssignment(t, fmt.Sprintf("round %d step %d %s", round, step, name), name, spec, out)
				if name == UniformAssignor {
					prev = out
				}
			}
			// A member leaves (its partitions are spread), then the
			// next step assigns again from prev.
			if len(spec.members) > 1 {
				gone := rng.Intn(len(spec.members))
				delete(prev, spec.members[gone].id)
				spec.members = append(spec.members[:gone], spec.members[gone+1:]...)
			}
		}
	}
}

func checkAssignment(t *testing.T, what, name string, spec *groupSpec, out map[string]Assignment) {
	t.Helper()
	owner := map[TopicID]map[int32]string{}
	for _, m := range spec.members {
		a := out[m.id]
		for id, ps := range a {
			if !m.topics[id] {
				t.Fatalf("%s: %s got topic %x it does not read", what, m.id, id[:1])
			}
			for _, p := range ps {
				if owner[id] == nil {
					owner[id] = map[int32]string{}
				}
				if o, dup := owner[id][p]; dup {
					t.Fatalf("%s: partition %x-%d to %s and %s", what, id[:1], p, o, m.id)
				}
				owner[id][p] = m.id
			}
		}
	}
	subscribed := map[TopicID]bool{}
	for _, m := range spec.members {
		for id := range m.topics {
			subscribed[id] = true
		}
	}
	for id := range subscribed {
		if got := int32(len(owner[id])); got != spec.partitions[id] {
			t.Fatalf("%s: topic %x has %d of %d partitions assigned", what, id[:1], got, spec.partitions[id])
		}
	}
	if spec.homogeneous && name == UniformAssignor {
		lo, hi := 1<<30, 0
		for _, m := range spec.members {
			n := out[m.id].count()
			lo, hi = min(lo, n), max(hi, n)
		}
		if hi-lo > 1 {
			t.Fatalf("%s: homogeneous sizes from %d to %d", what, lo, hi)
		}
	}
	if name == RangeAssignor {
		for _, m := range spec.members {
			for id, ps := range out[m.id] {
				if int(ps[len(ps)-1]-ps[0]) != len(ps)-1 {
					t.Fatalf("%s: %s's range of %x is not contiguous: %v", what, m.id, id[:1], ps)
				}
			}
		}
	}
}

// TestUniformHomogeneousSticky: members keep everything they had up to
// their quota; only the surplus and the unowned move (Apache's
// UniformHomogeneousAssignmentBuilder).
func TestUniformHomogeneousSticky(t *testing.T) {
	a := TopicID{1}
	subs := map[TopicID]bool{a: true}
	spec := &groupSpec{partitions: map[TopicID]int32{a: 6}, homogeneous: true, members: []*memberSpec{
		{id: "m0", topics: subs, current: Assignment{a: {0, 1, 2}}},
		{id: "m1", topics: subs, current: Assignment{a: {3, 4, 5}}},
		{id: "m2", topics: subs, current: Assignment{}},
	}}
	out, err := assign(UniformAssignor, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"m0": "[0 1]", "m1": "[3 4]", "m2": "[2 5]"}
	for id, w := range want {
		if got := fmt.Sprint(out[id][a]); got != w {
			t.Fatalf("%s: %s, want %s", id, got, w)
		}
	}
}

// TestRangeStaticMembersFirst: static members, by instance id, come before
// dynamic ones, by member id (Apache's RangeAssignor.sortMemberIds).
func TestRangeStaticMembersFirst(t *testing.T) {
	a := TopicID{1}
	subs := map[TopicID]bool{a: true}
	z, b := "z", "b"
	spec := &groupSpec{partitions: map[TopicID]int32{a: 5}, members: []*memberSpec{
		{id: "aaa", topics: subs},
		{id: "mmm", instanceID: &z, topics: subs},
		{id: "zzz", instanceID: &b, topics: subs},
	}}
	out, _ := assign(RangeAssignor, spec)
	want := map[string]string{"zzz": "[0 1]", "mmm": "[2 3]", "aaa": "[4]"}
	for id, w := range want {
		if got := fmt.Sprint(out[id][a]); got != w {
			t.Fatalf("%s: %s, want %s", id, got, w)
		}
	}
}
