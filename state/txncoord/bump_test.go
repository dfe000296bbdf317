package txncoord

import (
	"reflect"
	"testing"
	"time"

	"kaas/model/txnstate"
)

// TestBumpsSayWhy: every counted epoch bump is described once it is
// durable — whose, from which epoch to which, and why — for the
// inspector's timeline; a retried bump, a new entry and a failed write
// describe none.
func TestBumpsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string
		run    func(tx *Txn) Step
		fail   bool // the first write fails
		want   []Bump
	}{
		{"new producer id", "", ipi(none), false, nil},
		{"rejoin", "⟨P,2,P,-1,Empty⟩", ipi(none), false, []Bump{{pidP, 3, pidP, 2, Rejoin}}},
		{"rejoin with a claim", "⟨P,2,P,1,CompleteCommit⟩", ipi(claim{"P", 2}), false, []Bump{{pidP, 3, pidP, 2, Rejoin}}},
		{"retried bump", "⟨P,2,P,1,Empty⟩", ipi(claim{"P", 1}), false, nil},
		{"rotation", "⟨P,32766,P,-1,Empty⟩", ipi(none), false, []Bump{{pidM, 0, pidP, 32766, Rotation}}},
		{"rejoin mid-transaction", "⟨P,2,P,1,Ongoing,{a-0}⟩", ipi(none), false, []Bump{{pidP, 3, pidP, 2, RejoinAbort}}},
		{"reaper", "⟨P,2,P,1,Ongoing,{a-0}⟩", func(tx *Txn) Step { return tx.Reap(now0.Add(time.Hour)) }, false, []Bump{{pidP, 3, pidP, 2, Reaper}}},
		{"write fails", "⟨P,2,P,-1,Empty⟩", ipi(none), true, nil},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		if tc.fail {
			w.persistErr = func(txnstate.Entry) error { return errDisk }
		}
		w.drive(tx, tc.run(tx))
		if !reflect.DeepEqual(w.bumps, tc.want) {
			t.Errorf("%s: bumps %+v, want %+v", tc.name, w.bumps, tc.want)
		}
	}
}

func ipi(c claim) func(tx *Txn) Step {
	return func(tx *Txn) Step { return tx.InitProducerID("r", ipiReq(c), now0, newPIDs()) }
}
