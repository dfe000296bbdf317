package ownership

import (
	"reflect"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Unix(1000, 0)
	p0, p1 := PartitionUnit("orders", 0), PartitionUnit("orders", 1)
	one := map[string]int32{"orders": 1}
	two := map[string]int32{"orders": 2}
	for _, tc := range []struct {
		name string
		w    World
		want Plan
	}{{
		name: "no lease: every held unit is lost, nothing is claimed",
		w:    World{Self: 1, Members: []int32{1}, Topics: two, Held: map[string]Held{p0: {Lease: 7}, p1: {Lease: 7}}},
		want: Plan{Lost: []string{p0, p1}},
	}, {
		name: "a new lease: units of the old one are lost and claimed again",
		w:    World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1}, Topics: one, Held: map[string]Held{p0: {Lease: 7, Rev: 5}}, Epochs: map[string]int32{p0: 3}},
		want: Plan{Lost: []string{p0}, Claims: []Claim{{p0, 3, true}}, Pending: 1},
	}, {
		name: "alone: claims every partition, epochs as last seen",
		w:    World{Self: 1, Lease: 8, Members: []int32{1}, Topics: two, Epochs: map[string]int32{p1: 4}},
		want: Plan{Claims: []Claim{{p0, 0, false}, {p1, 4, true}}, Pending: 2},
	}, {
		name: "alone with coordinator slots: claims them too, in unit order",
		w:    World{Self: 1, Lease: 8, Members: []int32{1}, Slots: 2},
		want: Plan{Claims: []Claim{{"g/0", 0, false}, {"g/1", 0, false}, {"t/0", 0, false}, {"t/1", 0, false}}, Pending: 4},
	}, {
		name: "the previous owner's key still exists: wait",
		w:    World{Self: 1, Lease: 8, Members: []int32{1}, Topics: one, Keys: map[string]Key{p0: {Broker: 2, Epoch: 1}}},
		want: Plan{Pending: 1},
	}, {
		name: "an open that failed is held back until its retry time",
		w:    World{Self: 1, Lease: 8, Members: []int32{1}, Topics: two, RetryAt: map[string]time.Time{p0: now.Add(time.Second), p1: now}, Now: now},
		want: Plan{Claims: []Claim{{p1, 0, false}}, Pending: 2},
	}, {
		name: "held, keyed and wanted: kept",
		w:    World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1}, Topics: one, Keys: map[string]Key{p0: {1, 2}}, Held: map[string]Held{p0: {8, 9}}},
		want: Plan{},
	}, {
		name: "reassigned to a live peer: handed off",
		w: World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1, 2}, Topics: one, Reassigned: map[string]int32{p0: 2},
			Keys: map[string]Key{p0: {1, 2}}, Held: map[string]Held{p0: {8, 9}}},
		want: Plan{Releases: []Release{{p0, true}}},
	}, {
		name: "reassigned to a broker that is not alive: kept",
		w: World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1}, Topics: one, Reassigned: map[string]int32{p0: 3},
			Keys: map[string]Key{p0: {1, 2}}, Held: map[string]Held{p0: {8, 9}}},
		want: Plan{},
	}, {
		name: "reassigned here: claimed though hashing prefers another",
		w:    World{Self: 1, Lease: 8, Members: []int32{1, 2}, Topics: one, Reassigned: map[string]int32{p0: 1}},
		want: Plan{Claims: []Claim{{p0, 0, false}}, Pending: 1},
	}, {
		name: "the key is someone else's: stopped at once, then waited for",
		w:    World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1}, Topics: one, Keys: map[string]Key{p0: {2, 3}}, Held: map[string]Held{p0: {8, 9}}},
		want: Plan{Releases: []Release{{p0, false}}, Pending: 1},
	}, {
		name: "the key is gone: stopped at once and claimed again",
		w:    World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1}, Topics: one, Held: map[string]Held{p0: {8, 9}}, Epochs: map[string]int32{p0: 2}},
		want: Plan{Releases: []Release{{p0, false}}, Claims: []Claim{{p0, 2, true}}, Pending: 1},
	}, {
		name: "a view older than the claim cannot show its key: nothing done",
		w:    World{Self: 1, Lease: 8, Rev: 8, Members: []int32{1}, Topics: one, Held: map[string]Held{p0: {8, 9}}},
		want: Plan{},
	}, {
		name: "a key of ours left behind by a hand-off is deleted, not claimed over",
		w:    World{Self: 1, Lease: 8, Members: []int32{1}, Topics: one, Keys: map[string]Key{p0: {1, 5}}},
		want: Plan{LeftKeys: []LeftKey{{p0, 5}}, Pending: 1},
	}, {
		name: "a deleted topic's held partition is handed off",
		w:    World{Self: 1, Lease: 8, Rev: 10, Members: []int32{1}, Keys: map[string]Key{p0: {1, 2}}, Held: map[string]Held{p0: {8, 9}}},
		want: Plan{Releases: []Release{{p0, true}}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(tc.w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide:\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

func TestPreferredAndUnits(t *testing.T) {
	ms := []int32{1, 2, 3}
	u := PartitionUnit("orders", 0)
	if got, want := Preferred(u, ms, 0, false), Owner(u, ms); got != want {
		t.Errorf("not reassigned: %d, want rendezvous %d", got, want)
	}
	if got := Preferred(u, ms, 2, true); got != 2 {
		t.Errorf("reassigned to live 2: %d", got)
	}
	if got, want := Preferred(u, ms, 9, true), Owner(u, ms); got != want {
		t.Errorf("reassigned to dead 9: %d, want rendezvous %d", got, want)
	}
	got := Units(map[string]int32{"b": 1, "a": 2}, 1)
	want := []string{"t/0", "g/0", "p/a/0", "p/a/1", "p/b/0"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Units = %v, want %v", got, want)
	}
}
