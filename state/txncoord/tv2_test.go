package txncoord

import (
	"reflect"
	"strconv"
	"testing"
)

// TestEndTxnV2 is R-TV2-2..4: a TV2 end bumps the epoch (markers at the
// bumped epoch, the answer carries it), rotates the producer id at
// exhaustion, answers a retry (the epoch one below, or the old producer id
// at 32766 after a rotation) with the current producer id and epoch, may
// abort with nothing added, and fences a delayed end of the previous
// transaction.
func TestEndTxnV2(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string
		pid    string
		epoch  int16
		commit bool
		code   int16
		answer string // "pid,epoch" of a 0 answer
		after  string // "" = unchanged
		trace  []string
	}{
		{"commit bumps", "⟨P,3,P,2,Ongoing,{a-0}⟩", "P", 3, true, 0, "P,4", "⟨P,4,P,3,CompleteCommit⟩", []string{
			"write ⟨P,4,P,3,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,4)", "write ⟨P,4,P,3,CompleteCommit⟩", "answer 0 (P,4)"}},
		{"abort bumps", "⟨P,3,P,2,Ongoing,{a-0}⟩", "P", 3, false, 0, "P,4", "⟨P,4,P,3,CompleteAbort⟩", nil},
		{"exhausted: rotation", "⟨P,32766,P,32765,Ongoing,{a-0}⟩", "P", 32766, true, 0, "M,0", "⟨M,0,P,32766,CompleteCommit⟩", []string{
			"write ⟨P,32767,P,32766,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,32767)", "write ⟨M,0,P,32766,CompleteCommit⟩", "answer 0 (M,0)"}},
		{"one below the exhaustion: no rotation", "⟨P,32765,P,32764,Ongoing,{a-0}⟩", "P", 32765, true, 0, "P,32766", "⟨P,32766,P,32765,CompleteCommit⟩", nil},
		{"retry of a commit", "⟨P,4,P,3,CompleteCommit⟩", "P", 3, true, 0, "P,4", "", nil},
		{"retry of a commit as an abort", "⟨P,4,P,3,CompleteCommit⟩", "P", 3, false, 48, "", "", nil},
		{"retry of an abort", "⟨P,4,P,3,CompleteAbort⟩", "P", 3, false, 0, "P,4", "", nil},
		{"retry of a rotation whose answer was lost", "⟨M,0,P,32766,CompleteCommit⟩", "P", 32766, true, 0, "M,0", "", nil},
		{"an old id not at 32766", "⟨M,0,P,32766,CompleteCommit⟩", "P", 32765, true, 49, "", "", nil},
		{"commit after a commit, current epoch", "⟨P,4,P,3,CompleteCommit⟩", "P", 4, true, 48, "", "", nil},
		{"abort with nothing added after a commit", "⟨P,4,P,3,CompleteCommit⟩", "P", 4, false, 0, "P,5", "⟨P,5,P,4,CompleteAbort⟩", []string{
			"write ⟨P,5,P,4,PrepareAbort⟩", "write ⟨P,5,P,4,CompleteAbort⟩", "answer 0 (P,5)"}},
		{"abort with nothing added, Empty", "⟨P,0,P,-1,Empty⟩", "P", 0, false, 0, "P,1", "⟨P,1,P,0,CompleteAbort⟩", nil},
		{"commit with nothing added, Empty", "⟨P,0,P,-1,Empty⟩", "P", 0, true, 48, "", "", nil},
		{"delayed end of the previous transaction", "⟨P,4,P,3,Ongoing,{a-0}⟩", "P", 3, true, 90, "", "", nil},
		{"an epoch ahead", "⟨P,4,P,3,Ongoing,{a-0}⟩", "P", 5, true, 90, "", "", nil},
		{"older than the retry", "⟨P,5,P,4,CompleteCommit⟩", "P", 3, true, 90, "", "", nil},
		{"Prepare: a retry", "⟨P,4,P,3,PrepareCommit,{a-0}⟩", "P", 3, true, 51, "", "", nil},
		{"Prepare: the other direction", "⟨P,4,P,3,PrepareCommit,{a-0}⟩", "P", 3, false, 48, "", "", nil},
		{"Prepare: the bumped epoch", "⟨P,4,P,3,PrepareCommit,{a-0}⟩", "P", 4, true, 90, "", "", nil},
		{"unknown producer id", "⟨P,4,P,3,Ongoing,{a-0}⟩", "Q", 4, true, 49, "", "", nil},
		{"no entry", "", "P", 0, true, 49, "", "", nil},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidNames[tc.pid], ProducerEpoch: tc.epoch, Commit: tc.commit, TV2: true}, now0, newPIDs()))
		a := w.only()
		if a.Code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, a.Code, tc.code)
			continue
		}
		if tc.code == 0 {
			if got := pidName(a.ProducerID) + "," + itoa16(a.Epoch); got != tc.answer {
				t.Errorf("%s: answered %s, want %s", tc.name, got, tc.answer)
			}
		} else if a.ProducerID != -1 || a.Epoch != -1 {
			t.Errorf("%s: error answer carries (%d,%d), want -1s", tc.name, a.ProducerID, a.Epoch)
		}
		after := tc.after
		if after == "" {
			after = tc.before
		}
		if got := show(tx.Entry(), tx.Persisted()); got != after {
			t.Errorf("%s: entry %s, want %s", tc.name, got, after)
		}
		if tc.trace != nil && !reflect.DeepEqual(w.trace, tc.trace) {
			t.Errorf("%s: trace %q, want %q", tc.name, w.trace, tc.trace)
		}
		if tx.Entry().State.IsComplete() && tc.after != "" && tx.Entry().TV != 2 {
			t.Errorf("%s: the entry does not record transaction version 2", tc.name)
		}
	}
}

// TestEndTxnV2Bumps: a TV2 end's bump and a rotation are described once
// Prepare* is durable.
func TestEndTxnV2Bumps(t *testing.T) {
	for _, tc := range []struct {
		before string
		epoch  int16
		want   []Bump
	}{
		{"⟨P,3,P,2,Ongoing,{a-0}⟩", 3, []Bump{{pidP, 4, pidP, 3, EndTxnBump}}},
		{"⟨P,32766,P,32765,Ongoing,{a-0}⟩", 32766, []Bump{{pidM, 0, pidP, 32766, Rotation}}},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, ProducerEpoch: tc.epoch, Commit: true, TV2: true}, now0, newPIDs()))
		if !reflect.DeepEqual(w.bumps, tc.want) {
			t.Errorf("%s: bumps %+v, want %+v", tc.before, w.bumps, tc.want)
		}
	}
}

// TestImplicitAddV2: a TV2 add (Produce v12, TxnOffsetCommit v5) starts a
// TV2 transaction; a classic AddPartitionsToTxn starts a classic one.
func TestImplicitAddV2(t *testing.T) {
	for _, tv2 := range []bool{true, false} {
		tx := load(t, "⟨P,4,P,3,CompleteCommit⟩")
		w := newWorld(t)
		w.drive(tx, tx.AddPartitions("add", AddPartitions{ProducerID: pidP, ProducerEpoch: 4, Partitions: tps("a-0"), TV2: tv2}, now0))
		if a := w.only(); a.Code != 0 {
			t.Fatalf("tv2=%v: add answered %d", tv2, a.Code)
		}
		if want := map[bool]int8{true: 2, false: 0}[tv2]; tx.Entry().TV != want {
			t.Errorf("tv2=%v: entry TV %d, want %d", tv2, tx.Entry().TV, want)
		}
	}
}

func itoa16(n int16) string { return strconv.Itoa(int(n)) }
