package txncoord

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"kaas/model/txnstate"
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
			"end-fence (P,4) a-0", "write ⟨P,4,P,3,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,4)", "answer 0 (P,4)",
			"end-fence drop (P,4)", "write ⟨P,4,P,3,CompleteCommit⟩"}},
		{"abort bumps", "⟨P,3,P,2,Ongoing,{a-0}⟩", "P", 3, false, 0, "P,4", "⟨P,4,P,3,CompleteAbort⟩", nil},
		{"exhausted: rotation", "⟨P,32766,P,32765,Ongoing,{a-0}⟩", "P", 32766, true, 0, "M,0", "⟨M,0,P,32766,CompleteCommit⟩", []string{
			"end-fence (P,32767) a-0", "write ⟨P,32767,P,32766,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,32767)", "answer 0 (M,0)",
			"end-fence drop (P,32767)", "write ⟨M,0,P,32766,CompleteCommit⟩"}},
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

// TestEndTxnV2EarlyAnswer is R-TV2-7: a TV2 end is answered once
// Prepare* is durable and every partition has acknowledged the end fence,
// whichever comes last; a fence not acknowledged (or a TV1 end, which
// fences nothing) is answered after the markers; a failed Prepare* drops
// the fence it started.
func TestEndTxnV2EarlyAnswer(t *testing.T) {
	const before = "⟨P,3,P,2,Ongoing,{a-0 a-1 __consumer_offsets-7}⟩"
	prepare := "write ⟨P,4,P,3,PrepareCommit,{a-0 a-1 __consumer_offsets-7}⟩"
	markers := []string{"marker COMMIT a-0 (P,4)", "marker COMMIT a-1 (P,4)", "marker COMMIT groups  (P,4)"}
	for _, tc := range []struct {
		name  string
		setup func(w *world)
		tv1   bool
		trace []string
	}{
		{"fence acknowledged first", nil, false, append(append([]string{"end-fence (P,4) a-0 a-1", prepare}, markers...),
			"answer 0 (P,4)", "end-fence drop (P,4)", "write ⟨P,4,P,3,CompleteCommit⟩")},
		{"fence refused: after the markers", func(w *world) { w.endFenceErr = errors.New("peer unreachable") }, false,
			append(append([]string{"end-fence (P,4) a-0 a-1", prepare}, markers...), "write ⟨P,4,P,3,CompleteCommit⟩", "answer 0 (P,4)")},
		{"fence never answered: after the markers", func(w *world) { w.holdEndFence = true }, false,
			append(append([]string{"end-fence (P,4) a-0 a-1", prepare}, markers...), "write ⟨P,4,P,3,CompleteCommit⟩", "answer 0 (P,4)")},
		{"Prepare* failed", func(w *world) { w.persistErr = func(txnstate.Entry) error { return errors.New("disk") } }, false,
			[]string{"end-fence (P,4) a-0 a-1", prepare, "end-fence drop (P,4)", "answer 15 (-1,-1)"}},
		{"TV1: no fence, after the markers", nil, true, nil},
	} {
		tx := load(t, before)
		w := newWorld(t)
		if tc.setup != nil {
			tc.setup(w)
		}
		w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, ProducerEpoch: 3, Commit: true, TV2: !tc.tv1}, now0, newPIDs()))
		if tc.tv1 {
			if got := w.traced("end-fence"); len(got) != 0 || w.trace[len(w.trace)-1] != "answer 0" {
				t.Errorf("%s: trace %q, want no fence and the answer last", tc.name, w.trace)
			}
			continue
		}
		if !reflect.DeepEqual(w.trace, tc.trace) {
			t.Errorf("%s: trace %q\nwant %q", tc.name, w.trace, tc.trace)
		}
	}

	// The fence acknowledged after Prepare* is durable: answered then,
	// markers still out.
	tx := load(t, before)
	w := newWorld(t)
	w.holdEndFence, w.hold = true, true
	s := tx.EndTxn("end", EndTxn{ProducerID: pidP, ProducerEpoch: 3, Commit: true, TV2: true}, now0, newPIDs())
	seq := s.EndFence.Seq
	w.drive(tx, s)
	if len(w.answers) != 0 || !tx.InFlight() {
		t.Fatalf("answered %v before the fence was acknowledged", w.answers)
	}
	w.drive(tx, tx.EndFenceDone(seq+1, nil)) // a stale outcome changes nothing
	if len(w.answers) != 0 {
		t.Fatalf("answered on a stale fence outcome: %v", w.answers)
	}
	w.drive(tx, tx.EndFenceDone(seq, nil))
	if a := w.only(); a.Code != 0 || a.ProducerID != pidP || a.Epoch != 4 || !tx.InFlight() {
		t.Fatalf("answer %+v in flight %v: want (P,4) with the markers still out", a, tx.InFlight())
	}
	w.release(tx)
	if len(w.answers) != 1 || show(tx.Entry(), true) != "⟨P,4,P,3,CompleteCommit⟩" {
		t.Fatalf("answers %v entry %s after the markers", w.answers, show(tx.Entry(), true))
	}
}

func itoa16(n int16) string { return strconv.Itoa(int(n)) }

// TestResumeEndFence (R-TV2-7): a Prepare* entry of a TV2 end found at
// start fences its data partitions again; a classic end, a fence abort
// and an end with only offsets do not.
func TestResumeEndFence(t *testing.T) {
	for _, tc := range []struct {
		entry string
		tv    int8
		want  string
	}{
		{"⟨P,4,P,3,PrepareCommit,{a-0 a-1 __consumer_offsets-7}⟩", 2, "(P,4) [{a 0} {a 1}]"},
		{"⟨P,32767,P,32766,PrepareAbort,{a-0}⟩", 2, "(P,32767) [{a 0}]"},
		{"⟨P,4,P,3,PrepareCommit,{a-0}⟩", 0, ""},
		{"⟨P,5,P,-1,PrepareAbort,{a-0}⟩", 2, ""},
		{"⟨P,4,P,3,PrepareCommit,{__consumer_offsets-7}⟩", 2, ""},
		{"⟨P,4,P,3,CompleteCommit⟩", 2, ""},
	} {
		e := load(t, tc.entry).Entry()
		e.TV = tc.tv
		got := ""
		if f := ResumeEndFence(e); f != nil {
			got = fmt.Sprintf("(%s,%d) %v", pidName(f.ProducerID), f.Epoch, f.Partitions)
		}
		if got != tc.want {
			t.Errorf("%s TV%d: %q, want %q", tc.entry, tc.tv, got, tc.want)
		}
	}
}
