package txncoord

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model/txnstate"
)

// claim is an InitProducerId v3+ claim; none is (-1,-1).
type claim struct {
	pid   string
	epoch int16
}

var none = claim{}

func ipiReq(c claim) InitProducerID {
	r := InitProducerID{TimeoutMs: 60000}
	if c != none {
		r.HasClaim, r.ProducerID, r.ProducerEpoch = true, pidNames[c.pid], c.epoch
		if r.ProducerID == 0 {
			r.ProducerID = 77 // a PID this broker never issued
		}
	}
	return r
}

// TestWorkedExamples is init-producer-id.md's table of worked examples
// (v4, timeout 60000, t owned here), rows 1–20: the entry before, the
// request's claim, the answer, the entry after, and the fences sent
// before the answer (R-IPI-13, R-IPI-10 step 3). Rows 8 and 21–24 are
// the handler's checks before the coordinator (R-IPI-1 steps 1–6,
// R-IPI-2, R-IPI-3), tested through the wire in broker/txn_scenarios_ipi_test.go.
func TestWorkedExamples(t *testing.T) {
	const unchanged = "unchanged"
	for _, tc := range []struct {
		n      int
		rules  string
		before string
		claim  claim
		code   int16
		pid    string
		epoch  int16
		after  string
		fences []string
	}{
		{1, "R-IPI-6,11", "", none, 0, "M", 0, "⟨M,0,M,-1,Empty⟩", nil},
		{2, "R-IPI-6,8a", "", claim{"77", 5}, 0, "M", 0, "⟨M,0,M,-1,Empty⟩", nil},
		{3, "R-IPI-11", "⟨P,0,P,-1,Empty⟩", none, 0, "P", 1, "⟨P,1,P,-1,Empty⟩", []string{"fence (P,1)"}},
		{4, "R-IPI-11", "⟨P,1,P,-1,CompleteCommit⟩", claim{"P", 1}, 0, "P", 2, "⟨P,2,P,1,Empty⟩", []string{"fence (P,2)"}},
		{5, "R-IPI-11 retry", "⟨P,2,P,1,Empty⟩", claim{"P", 1}, 0, "P", 2, unchanged, []string{"fence (P,2)"}},
		{6, "R-IPI-11", "⟨P,2,P,1,Empty⟩", claim{"P", 0}, 90, "", -1, unchanged, nil},
		{7, "R-IPI-8", "⟨P,2,P,1,Empty⟩", claim{"Q", 2}, 90, "", -1, unchanged, nil},
		{9, "R-IPI-10", "⟨P,5,P,4,Ongoing,{a-0}⟩", none, 51, "", -1, "⟨P,6,P,-1,CompleteAbort⟩", []string{"fence (P,6)"}},
		{10, "R-IPI-11", "⟨P,6,P,-1,CompleteAbort⟩", none, 0, "P", 7, "⟨P,7,P,-1,Empty⟩", []string{"fence (P,7)"}},
		{11, "R-IPI-11", "⟨P,6,P,-1,CompleteAbort⟩", claim{"P", 5}, 90, "", -1, unchanged, nil},
		{12, "R-IPI-10", "⟨P,5,P,4,Ongoing,{a-0}⟩", claim{"P", 3}, 51, "", -1, "⟨P,6,P,-1,CompleteAbort⟩", []string{"fence (P,6)"}},
		{13, "R-IPI-8", "⟨P,5,P,4,Ongoing,{a-0}⟩", claim{"Q", 5}, 90, "", -1, unchanged, nil},
		{14, "R-IPI-9", "⟨P,5,P,4,PrepareCommit,{a-0}⟩", claim{"P", 5}, 51, "", -1, unchanged, nil},
		{15, "R-IPI-11", "⟨P,32765,P,-1,Empty⟩", none, 0, "P", 32766, "⟨P,32766,P,-1,Empty⟩", []string{"fence (P,32766)"}},
		{16, "R-IPI-12", "⟨P,32766,P,-1,Empty⟩", none, 0, "M", 0, "⟨M,0,P,-1,Empty⟩", nil},
		{17, "R-IPI-12", "⟨P,32766,P,32765,CompleteAbort⟩", claim{"P", 32766}, 0, "M", 0, "⟨M,0,P,32766,Empty⟩", nil},
		{18, "R-IPI-8c,11", "⟨M,0,P,32766,Empty⟩", claim{"P", 32766}, 0, "M", 0, "⟨M,0,M,32766,Empty⟩", nil},
		{19, "R-IPI-8", "⟨M,0,M,32766,Empty⟩", claim{"P", 32766}, 90, "", -1, unchanged, nil},
		{20, "R-IPI-12, U-3", "⟨P,32766,P,32765,Empty⟩", claim{"P", 32765}, -1, "", -1, unchanged, nil},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.drive(tx, tx.InitProducerID("req", ipiReq(tc.claim), w.now, newPIDs()))
		want := Answer{To: "req", Code: tc.code, ProducerID: -1, Epoch: -1}
		if tc.code == 0 {
			want.ProducerID, want.Epoch = pidNames[tc.pid], tc.epoch
		}
		if got := w.only(); !reflect.DeepEqual(got, want) {
			t.Errorf("#%d (%s): answer %s, want %s", tc.n, tc.rules, showAnswer(got), showAnswer(want))
		}
		after := tc.after
		if after == unchanged {
			after = tc.before
		}
		if got := show(tx.Entry(), tx.Persisted()); got != after {
			t.Errorf("#%d (%s): entry after %s, want %s", tc.n, tc.rules, got, after)
		}
		if tc.code != 0 && tc.code != 51 && len(w.writes) != 0 {
			t.Errorf("#%d (%s): an error answer wrote %v", tc.n, tc.rules, w.traced("write"))
		}
		if got := w.traced("fence"); !reflect.DeepEqual(got, tc.fences) {
			t.Errorf("#%d (%s): fences %q, want %q", tc.n, tc.rules, got, tc.fences)
		}
		if tx.InFlight() {
			t.Errorf("#%d: still in flight", tc.n)
		}
	}
}

// TestRejoinAbortOrder is R-IPI-10 (example 9) step by step: PrepareAbort
// at epoch+1 with partitions, timeout and start time kept, the fence
// before any marker, ABORT markers at the fence epoch, CompleteAbort,
// then the answer 51; the retry bumps to the next epoch (example 10).
func TestRejoinAbortOrder(t *testing.T) {
	tx := load(t, "⟨P,5,P,4,Ongoing,{a-0 a-1}⟩")
	start := tx.Entry().TxnStartMs
	w := newWorld(t)
	w.drive(tx, tx.InitProducerID("rejoin", ipiReq(none), w.now, newPIDs()))
	want := []string{
		"write ⟨P,6,P,-1,PrepareAbort,{a-0 a-1}⟩",
		"fence (P,6)",
		"marker ABORT a-0 (P,6)",
		"marker ABORT a-1 (P,6)",
		"write ⟨P,6,P,-1,CompleteAbort⟩",
		"answer 51 (-1,-1)",
	}
	if !reflect.DeepEqual(w.trace, want) {
		t.Fatalf("trace\n%q\nwant\n%q", w.trace, want)
	}
	if p := w.writes[0]; p.TxnStartMs != start || p.TimeoutMs != 60000 {
		t.Fatalf("PrepareAbort changed the start time or timeout: %+v", p)
	}
	if !reflect.DeepEqual(w.events, []Event{EpochBump, Aborted}) {
		t.Fatalf("events %v", w.events)
	}
	w = newWorld(t)
	w.drive(tx, tx.InitProducerID("retry", ipiReq(none), w.now, newPIDs()))
	if a := w.only(); a.Code != 0 || a.ProducerID != pidP || a.Epoch != 7 {
		t.Fatalf("retry answered %s, want 0 (P,7)", showAnswer(a))
	}
}

// TestInFlight is R-TXN-2 / R-IPI-1 step 8 (S-13, S-42): while a
// transition waits on its markers every API answers 51 and nothing
// changes; R-TXN-5's VerifyOnly ignores in-flight transitions.
func TestInFlight(t *testing.T) {
	tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
	w := newWorld(t)
	w.hold = true
	w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, ProducerEpoch: 0, Commit: true}, w.now, nil))
	if !tx.InFlight() || tx.Persisting() || len(w.answers) != 0 {
		t.Fatalf("in flight %v, persisting %v, answers %v: want in flight on its markers, unanswered", tx.InFlight(), tx.Persisting(), w.answers)
	}
	before := show(tx.Entry(), true)
	for _, s := range []Step{
		tx.InitProducerID("ipi", ipiReq(none), w.now, newPIDs()),
		tx.InitProducerID("ipi claim", ipiReq(claim{"P", 0}), w.now, newPIDs()),
		tx.AddPartitions("apt", AddPartitions{ProducerID: pidP, ProducerEpoch: 0, Partitions: tps("a-1")}, w.now),
		tx.AddOffsets("aot", AddOffsets{ProducerID: pidP, ProducerEpoch: 0, Group: "g"}, w.now),
		tx.EndTxn("end again", EndTxn{ProducerID: pidP, ProducerEpoch: 0, Commit: true}, w.now, nil),
		tx.EndTxn("abort", EndTxn{ProducerID: pidP, ProducerEpoch: 0}, w.now, nil),
	} {
		if s.Persist != nil || s.Fence != nil || s.Answer == nil || s.Answer.Code != kerr.ConcurrentTransactions.Code {
			t.Fatalf("in flight: %+v, want only answer 51", s)
		}
	}
	// VerifyOnly (R-TXN-5) sees the PrepareCommit: 51 as well, for its own reason.
	if s := tx.AddPartitions("verify", AddPartitions{ProducerID: pidP, ProducerEpoch: 0, Partitions: tps("a-0"), VerifyOnly: true}, w.now); s.Answer.Code != 51 {
		t.Fatalf("verify during PrepareCommit: %+v", s.Answer)
	}
	if tx.Reap(w.now.Add(24*time.Hour)).Persist != nil {
		t.Fatal("the reaper touched an entry in flight")
	}
	if got := show(tx.Entry(), true); got != before {
		t.Fatalf("entry %s, want %s", got, before)
	}
	w.release(tx)
	if a := w.only(); a.To != "end" || a.Code != 0 {
		t.Fatalf("EndTxn answered %+v", a)
	}
	if got := show(tx.Entry(), true); got != "⟨P,0,P,-1,CompleteCommit⟩" {
		t.Fatalf("entry %s", got)
	}
}

// TestPersisting: a request is never fed while a write is outstanding
// (the actor holds it back); Persisting says when.
func TestPersisting(t *testing.T) {
	tx := load(t, "⟨P,0,P,-1,Empty⟩")
	s := tx.AddPartitions("apt", AddPartitions{ProducerID: pidP, ProducerEpoch: 0, Partitions: tps("a-0")}, now0)
	if s.Persist == nil || !tx.Persisting() || !tx.InFlight() || s.Answer != nil {
		t.Fatalf("step %+v persisting %v", s, tx.Persisting())
	}
	s = tx.PersistDone(nil, now0)
	if tx.Persisting() || tx.InFlight() || s.Answer == nil || s.Answer.Code != 0 {
		t.Fatalf("after the write: step %+v persisting %v", s, tx.Persisting())
	}
}

// TestFreshEntryWriteFails is R-IPI-6 with R-GEN-3: the first write of a
// new id fails → 15; the epoch -1 entry stays in memory and the next call
// treats it as new, with the same PID (no second allocation).
func TestFreshEntryWriteFails(t *testing.T) {
	tx := load(t, "")
	p := newPIDs()
	w := newWorld(t)
	w.persistErr = func(txnstate.Entry) error { return errDisk }
	w.drive(tx, tx.InitProducerID("1", ipiReq(none), w.now, p))
	if a := w.only(); a.Code != kerr.CoordinatorNotAvailable.Code || a.ProducerID != -1 {
		t.Fatalf("answer %s, want 15", showAnswer(a))
	}
	if tx.Persisted() || tx.Entry().Epoch != -1 || tx.Entry().ProducerID != pidM {
		t.Fatalf("entry %+v persisted %v, want ⟨M,-1⟩ in memory", tx.Entry(), tx.Persisted())
	}
	w = newWorld(t)
	w.drive(tx, tx.InitProducerID("2", ipiReq(claim{"77", 3}), w.now, p))
	if a := w.only(); a.Code != 0 || a.ProducerID != pidM || a.Epoch != 0 || p.calls != 1 {
		t.Fatalf("retry: %s after %d allocations, want 0 (M,0) after 1", showAnswer(a), p.calls)
	}
}

// TestAllocationFailure: no PID for a new entry → 14 (as the idempotent
// path, R-IPI-3); none for a rotation → 15.
func TestAllocationFailure(t *testing.T) {
	p := &pids{err: errors.New("no block")}
	for _, tc := range []struct {
		before string
		code   int16
	}{{"", kerr.CoordinatorLoadInProgress.Code}, {"⟨P,32766,P,-1,Empty⟩", kerr.CoordinatorNotAvailable.Code}} {
		tx := load(t, tc.before)
		s := tx.InitProducerID("r", ipiReq(none), now0, p)
		if s.Persist != nil || s.Answer == nil || s.Answer.Code != tc.code {
			t.Fatalf("%q: %+v, want only answer %d", tc.before, s, tc.code)
		}
	}
}

// TestBumpWriteOrFenceFails is R-IPI-13 and R-GEN-3 for the bump: the
// fence runs while the entry is written and the answer waits for both. A
// failed write leaves the entry as it was; a failed fence leaves it
// bumped. Both answer 15, and the retry fences again.
func TestBumpWriteOrFenceFails(t *testing.T) {
	tx := load(t, "⟨P,3,P,-1,Empty⟩")
	s := tx.InitProducerID("r", ipiReq(none), now0, newPIDs())
	if s.Fence == nil || s.Persist == nil {
		t.Fatalf("step %+v: want the fence and the write together", s)
	}
	// The fence answers first: nothing yet.
	if s := tx.FenceDone(nil, now0); s.Answer != nil || !tx.InFlight() {
		t.Fatalf("answered before the write: %+v", s)
	}
	s = tx.PersistDone(errDisk, now0)
	if s.Answer == nil || s.Answer.Code != kerr.CoordinatorNotAvailable.Code || show(tx.Entry(), true) != "⟨P,3,P,-1,Empty⟩" || tx.InFlight() {
		t.Fatalf("failed write: %+v entry %s", s.Answer, show(tx.Entry(), true))
	}

	w := newWorld(t)
	w.fenceErr = errDisk
	w.drive(tx, tx.InitProducerID("r", ipiReq(none), now0, newPIDs()))
	if a := w.only(); a.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("failed fence answered %s", showAnswer(a))
	}
	if got := show(tx.Entry(), true); got != "⟨P,4,P,-1,Empty⟩" {
		t.Fatalf("after a failed fence the entry is %s, want it bumped", got)
	}
	w = newWorld(t)
	w.drive(tx, tx.InitProducerID("r", ipiReq(none), now0, newPIDs()))
	if a := w.only(); a.Code != 0 || a.Epoch != 5 || !reflect.DeepEqual(w.traced("fence"), []string{"fence (P,5)"}) {
		t.Fatalf("retry: %s, fences %q", showAnswer(a), w.traced("fence"))
	}
}

// TestCountedEvents: a bump counts one epoch bump, a retried bump and a
// new entry none, a rotation one rotation.
func TestCountedEvents(t *testing.T) {
	for _, tc := range []struct {
		before string
		claim  claim
		want   []Event
	}{
		{"", none, nil},
		{"⟨P,2,P,-1,Empty⟩", none, []Event{EpochBump}},
		{"⟨P,2,P,1,Empty⟩", claim{"P", 1}, nil},
		{"⟨P,32766,P,-1,Empty⟩", none, []Event{EpochRotation}},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.drive(tx, tx.InitProducerID("r", ipiReq(tc.claim), now0, newPIDs()))
		if !reflect.DeepEqual(w.events, tc.want) {
			t.Errorf("%q %v: events %v, want %v", tc.before, tc.claim, w.events, tc.want)
		}
	}
}
