package ownership

import (
	"maps"
	"slices"
	"time"
)

// The decision of one reconcile of the ownership loop (broker/cluster):
// from the cluster view and what this broker holds, which units to stop,
// which owner keys to delete, which units to claim. Pure: the loop reads
// etcd and the clock, acts on the plan, and asks again on the next change.

// Key is a unit's owner key as the cluster view shows it.
type Key struct {
	Broker int32
	Epoch  int32
}

// Held is a unit this broker has open: the lease its owner key was
// created under and the etcd revision of the claim.
type Held struct {
	Lease int64
	Rev   int64
}

// World is what one reconcile decides from.
type World struct {
	Self int32
	// Lease is the session's lease now; 0 while none is held.
	Lease int64
	// Rev is the cluster view's etcd revision.
	Rev     int64
	Members []int32
	// Topics maps every topic to its partition count; Slots is how many
	// coordinator slots of each kind there are.
	Topics map[string]int32
	Slots  int
	// Reassigned maps a unit to the broker an operator chose for it.
	Reassigned map[string]int32
	Keys       map[string]Key
	// Epochs is each unit's last leader epoch, kept after its key goes.
	Epochs map[string]int32
	Held   map[string]Held
	// RetryAt holds back a unit whose last open failed until then.
	RetryAt map[string]time.Time
	Now     time.Time
}

// Release is a held unit to stop: HandOff for a graceful hand-off to the
// preferred owner while the lease is alive (fsync, close, delete the key);
// otherwise its key is gone or someone else's, and it stops at once.
type Release struct {
	Unit    string
	HandOff bool
}

// Claim is a unit to claim with the leader epoch the view last saw for it
// (Known false: never owned).
type Claim struct {
	Unit  string
	Epoch int32
	Known bool
}

// Plan is what a reconcile does, in this order: stop Lost, delete
// LeftKeys, apply Releases, make Claims. Every list is in unit order.
type Plan struct {
	// Lost were claimed under a lease that is not the session's now:
	// every key made under it is gone with it. Stopped at once.
	Lost []string
	// LeftKeys are owner keys naming this broker for units it does not
	// hold (a hand-off whose delete failed): deleted again, each only if
	// it still names this broker at that epoch.
	LeftKeys []LeftKey
	Releases []Release
	// Claims are units this broker should own whose previous owner's key
	// is gone and which are not held back.
	Claims []Claim
	// Pending counts the units this broker should own that it does not
	// hold once Lost and Releases are stopped (Claims among them): the
	// broker is settled when every claim of them opened.
	Pending int
}

// LeftKey is an owner key to delete if it still names this broker at Epoch.
type LeftKey struct {
	Unit  string
	Epoch int32
}

// Preferred is the broker that should own unit given the live members:
// the one an operator reassigned it to (reassigned) while that one is
// alive, else rendezvous hashing's owner.
func Preferred(unit string, members []int32, reassignedTo int32, reassigned bool) int32 {
	if reassigned && slices.Contains(members, reassignedTo) {
		return reassignedTo
	}
	return Owner(unit, members)
}

// Units lists every unit that exists: each coordinator slot (slots of
// each kind) and each partition of topics.
func Units(topics map[string]int32, slots int) []string {
	out := make([]string, 0, 2*slots)
	for n := range slots {
		out = append(out, TxnSlotUnit(n), OffsetsSlotUnit(n))
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		for p := int32(0); p < topics[name]; p++ {
			out = append(out, PartitionUnit(name, p))
		}
	}
	return out
}

// Decide is one reconcile's plan. Without a lease (w.Lease 0) it only
// stops what the lost lease held: nothing is claimed or kept.
func Decide(w World) Plan {
	var plan Plan
	held := map[string]Held{}
	for _, unit := range slices.Sorted(maps.Keys(w.Held)) {
		if h := w.Held[unit]; h.Lease != w.Lease {
			plan.Lost = append(plan.Lost, unit)
		} else {
			held[unit] = h
		}
	}
	if w.Lease == 0 {
		return plan
	}
	want := map[string]bool{}
	for _, u := range Units(w.Topics, w.Slots) {
		r, ok := w.Reassigned[u]
		if Preferred(u, w.Members, r, ok) == w.Self {
			want[u] = true
		}
	}
	for _, unit := range slices.Sorted(maps.Keys(w.Keys)) {
		if k := w.Keys[unit]; k.Broker == w.Self {
			if _, have := held[unit]; !have {
				plan.LeftKeys = append(plan.LeftKeys, LeftKey{unit, k.Epoch})
			}
		}
	}
	for _, unit := range slices.Sorted(maps.Keys(held)) {
		if w.Rev < held[unit].Rev {
			continue // the view predates the claim: it cannot show the key yet
		}
		k, keyed := w.Keys[unit]
		switch {
		case keyed && k.Broker == w.Self && want[unit]: // keep
		case keyed && k.Broker == w.Self:
			plan.Releases = append(plan.Releases, Release{unit, true})
			delete(held, unit)
		default:
			// The key is gone or someone else's: the view is newer than
			// the lease (expired and granted again).
			plan.Releases = append(plan.Releases, Release{unit, false})
			delete(held, unit)
		}
	}
	for _, unit := range slices.Sorted(maps.Keys(want)) {
		if _, have := held[unit]; have {
			continue
		}
		plan.Pending++
		if _, keyed := w.Keys[unit]; keyed {
			continue // the previous owner's key still exists: wait for it to go
		}
		if at, back := w.RetryAt[unit]; back && w.Now.Before(at) {
			continue // its last open failed: not yet
		}
		e, known := w.Epochs[unit]
		plan.Claims = append(plan.Claims, Claim{unit, e, known})
	}
	return plan
}
