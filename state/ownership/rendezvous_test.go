package ownership

import (
	"fmt"
	"math"
	"testing"
)

func units(n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, PartitionUnit("orders", int32(i)))
	}
	for s := 0; s < 50; s++ {
		out = append(out, TxnSlotUnit(s), OffsetsSlotUnit(s))
	}
	return out
}

func assign(us []string, members []int32) map[string]int32 {
	out := map[string]int32{}
	for _, u := range us {
		out[u] = Owner(u, members)
	}
	return out
}

func TestOwnerEdgeCases(t *testing.T) {
	if got := Owner("p/x/0", nil); got != -1 {
		t.Fatalf("no members: got %d, want -1", got)
	}
	if got := Owner("p/x/0", []int32{7}); got != 7 {
		t.Fatalf("one member: got %d", got)
	}
	// Order of the member list does not matter.
	a := assign(units(100), []int32{1, 2, 3})
	b := assign(units(100), []int32{3, 1, 2})
	for u := range a {
		if a[u] != b[u] {
			t.Fatalf("%s: owner depends on member order: %d vs %d", u, a[u], b[u])
		}
	}
	r := Ranked("t/3", []int32{1, 2, 3})
	if r[0] != Owner("t/3", []int32{1, 2, 3}) || len(r) != 3 {
		t.Fatalf("ranked %v does not start with the owner", r)
	}
	// The second-ranked member owns the unit once the first is gone.
	if Owner("t/3", []int32{r[1], r[2]}) != r[1] {
		t.Fatalf("after the owner leaves, %d should take over", r[1])
	}
}

// Table: when a member joins or leaves, only the units it gains or loses
// move, and the spread stays near even.
func TestMinimalMovement(t *testing.T) {
	us := units(600) // plus 100 slots
	cases := []struct {
		name          string
		before, after []int32
	}{
		{"join 1→2", []int32{1}, []int32{1, 2}},
		{"join 2→3", []int32{1, 2}, []int32{1, 2, 3}},
		{"join 3→4", []int32{1, 2, 3}, []int32{1, 2, 3, 4}},
		{"leave 3→2", []int32{1, 2, 3}, []int32{1, 3}},
		{"leave 5→4", []int32{0, 1, 2, 3, 4}, []int32{0, 1, 3, 4}},
		{"replace", []int32{1, 2, 3}, []int32{1, 2, 9}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, after := assign(us, c.before), assign(us, c.after)
			in := map[int32]bool{}
			for _, m := range c.after {
				in[m] = true
			}
			was := map[int32]bool{}
			for _, m := range c.before {
				was[m] = true
			}
			moved := 0
			for _, u := range us {
				if before[u] == after[u] {
					continue
				}
				moved++
				// A unit moves only away from a member that left or to
				// one that joined.
				if in[before[u]] && was[after[u]] {
					t.Errorf("%s moved %d→%d though both stayed", u, before[u], after[u])
				}
			}
			// Expected movement: the share of joined/left members.
			changed := 0
			for m := range in {
				if !was[m] {
					changed++
				}
			}
			for m := range was {
				if !in[m] {
					changed++
				}
			}
			n := math.Max(float64(len(c.before)), float64(len(c.after)))
			expect := float64(len(us)) * float64(changed) / n
			if float64(moved) > expect*1.35+10 {
				t.Errorf("moved %d of %d, expected about %.0f", moved, len(us), expect)
			}
			counts := map[int32]int{}
			for _, o := range after {
				counts[o]++
			}
			fair := float64(len(us)) / float64(len(c.after))
			for m, k := range counts {
				if math.Abs(float64(k)-fair) > fair*0.25 {
					t.Errorf("member %d owns %d units, fair share %.0f", m, k, fair)
				}
			}
		})
	}
}

func TestUnitNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{PartitionUnit("a.b", 3), "p/a.b/3"},
		{TxnSlotUnit(49), "t/49"},
		{OffsetsSlotUnit(0), "g/0"},
	} {
		if c.got != c.want {
			t.Errorf("got %q want %q", c.got, c.want)
		}
	}
	_ = fmt.Sprint()
}
