package txncoord

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/model/txnstate"
)

// TestAddPartitions is R-TXN-4 steps 4–7 (S-34, S-36): the producer
// check, in-flight/Prepare*, nothing new (nothing written), and the write
// of Ongoing with the union, txnStartMs set only when coming from
// Empty/Complete*.
func TestAddPartitions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before string
		pid    string
		epoch  int16
		add    string
		code   int16
		after  string // "" = unchanged
		write  bool
		start  bool // txnStartMs = now
	}{
		{"no entry (step 4)", "", "P", 0, "a-0", 49, "", false, false},
		{"another PID (step 4)", "⟨P,0,P,-1,Empty⟩", "Q", 0, "a-0", 49, "", false, false},
		{"another epoch (step 4)", "⟨P,1,P,-1,Empty⟩", "P", 0, "a-0", 90, "", false, false},
		{"PrepareCommit (step 5)", "⟨P,0,P,-1,PrepareCommit,{a-0}⟩", "P", 0, "a-1", 51, "", false, false},
		{"PrepareAbort (step 5)", "⟨P,0,P,-1,PrepareAbort,{a-0}⟩", "P", 0, "a-1", 51, "", false, false},
		{"all already in (step 6)", "⟨P,0,P,-1,Ongoing,{a-0 a-1}⟩", "P", 0, "a-0", 0, "", false, false},
		{"Empty → Ongoing (step 7)", "⟨P,0,P,-1,Empty⟩", "P", 0, "a-1 a-0", 0, "⟨P,0,P,-1,Ongoing,{a-0 a-1}⟩", true, true},
		{"Ongoing adds (step 7)", "⟨P,0,P,-1,Ongoing,{a-1}⟩", "P", 0, "a-0 a-1 b-0", 0, "⟨P,0,P,-1,Ongoing,{a-0 a-1 b-0}⟩", true, false},
		{"CompleteCommit → Ongoing", "⟨P,0,P,-1,CompleteCommit⟩", "P", 0, "a-0", 0, "⟨P,0,P,-1,Ongoing,{a-0}⟩", true, true},
		{"CompleteAbort → Ongoing", "⟨P,0,P,-1,CompleteAbort⟩", "P", 0, "a-0", 0, "⟨P,0,P,-1,Ongoing,{a-0}⟩", true, true},
	} {
		tx := load(t, tc.before)
		before := tx.Entry()
		w := newWorld(t)
		w.now = now0.Add(time.Minute)
		req := AddPartitions{ProducerID: pidNames[tc.pid], ProducerEpoch: tc.epoch, Partitions: tps(tc.add)}
		w.drive(tx, tx.AddPartitions("apt", req, w.now))
		a := w.only()
		if a.Code != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, a.Code, tc.code)
		}
		if tc.code == 0 && len(a.Partitions) != len(req.Partitions) {
			t.Errorf("%s: per-partition codes %v", tc.name, a.Partitions)
		}
		if (len(w.writes) > 0) != tc.write {
			t.Errorf("%s: writes %q", tc.name, w.traced("write"))
		}
		after := tc.after
		if after == "" {
			after = tc.before
		}
		if got := show(tx.Entry(), tx.Persisted()); got != after {
			t.Errorf("%s: entry %s, want %s", tc.name, got, after)
		}
		wantStart := before.TxnStartMs
		if tc.start {
			wantStart = w.now.UnixMilli()
		}
		if tc.after != "" && tx.Entry().TxnStartMs != wantStart {
			t.Errorf("%s: txnStartMs %d, want %d", tc.name, tx.Entry().TxnStartMs, wantStart)
		}
	}
}

// TestVerifyOnly is R-TXN-5's VerifyOnly (S-34): per partition NONE if in
// the set, INVALID_TXN_STATE if not; nothing changes.
func TestVerifyOnly(t *testing.T) {
	for _, tc := range []struct {
		before string
		epoch  int16
		code   int16
		parts  []int16
	}{
		{"", 0, 49, nil},
		{"⟨P,1,P,-1,Ongoing,{a-0}⟩", 0, 90, nil},
		{"⟨P,0,P,-1,PrepareCommit,{a-0}⟩", 0, 51, nil},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", 0, 0, []int16{0, 48}},
		{"⟨P,0,P,-1,Empty⟩", 0, 0, []int16{48, 48}},
	} {
		tx := load(t, tc.before)
		s := tx.AddPartitions("v", AddPartitions{ProducerID: pidP, ProducerEpoch: tc.epoch, Partitions: tps("a-0 a-2"), VerifyOnly: true}, now0)
		if s.Persist != nil || s.Answer == nil || s.Answer.Code != tc.code || !reflect.DeepEqual(s.Answer.Partitions, tc.parts) {
			t.Errorf("%q: %+v, want code %d %v", tc.before, s, tc.code, tc.parts)
		}
	}
}

// TestAddOffsets is R-TXN-6 (S-43): the group's offsets partition
// (__consumer_offsets, slot(g) = 3, R-CRD-1) and the group join the
// transaction; its marker is the groups' pending offsets, not a data
// marker (R-MRK-5).
func TestAddOffsets(t *testing.T) {
	tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
	w := newWorld(t)
	w.drive(tx, tx.AddOffsets("aot", AddOffsets{ProducerID: pidP, ProducerEpoch: 0, Group: "g"}, now0))
	if a := w.only(); a.Code != 0 {
		t.Fatalf("answer %s", showAnswer(a))
	}
	e := tx.Entry()
	if !e.HasPartition(model.TopicPartition{Topic: OffsetsTopic, Partition: 3}) || !reflect.DeepEqual(e.Groups, []string{"g"}) {
		t.Fatalf("entry %+v, want __consumer_offsets-3 and group g", e)
	}
	// The same group again: nothing new, nothing written (R-TXN-4 step 6).
	w = newWorld(t)
	w.drive(tx, tx.AddOffsets("aot", AddOffsets{ProducerID: pidP, ProducerEpoch: 0, Group: "g"}, now0))
	if len(w.writes) != 0 || w.only().Code != 0 {
		t.Fatalf("repeat: %q", w.trace)
	}
	w = newWorld(t)
	w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, ProducerEpoch: 0, Commit: true}, now0, nil))
	want := []string{"marker COMMIT a-0 (P,0)", "marker COMMIT groups g (P,0)"}
	if got := w.traced("marker"); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers %q, want %q", got, want)
	}
}

// TestEndTxn is R-TXN-7 steps 2–4 (S-37, S-38, S-42): the answer by state
// and direction; Ongoing goes through Prepare*, its markers and Complete*
// before it answers.
func TestEndTxn(t *testing.T) {
	for _, tc := range []struct {
		before string
		pid    string
		epoch  int16
		commit bool
		code   int16
		after  string // "" = unchanged
		trace  []string
	}{
		{"", "P", 0, true, 49, "", nil},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", "Q", 0, true, 49, "", nil},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", "P", 1, true, 90, "", nil},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", "P", 0, true, 0, "⟨P,0,P,-1,CompleteCommit⟩", []string{
			"write ⟨P,0,P,-1,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,0)", "write ⟨P,0,P,-1,CompleteCommit⟩", "answer 0"}},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", "P", 0, false, 0, "⟨P,0,P,-1,CompleteAbort⟩", []string{
			"write ⟨P,0,P,-1,PrepareAbort,{a-0}⟩", "marker ABORT a-0 (P,0)", "write ⟨P,0,P,-1,CompleteAbort⟩", "answer 0"}},
		{"⟨P,0,P,-1,CompleteCommit⟩", "P", 0, true, 0, "", nil},
		{"⟨P,0,P,-1,CompleteCommit⟩", "P", 0, false, 48, "", nil},
		{"⟨P,0,P,-1,CompleteAbort⟩", "P", 0, false, 0, "", nil},
		{"⟨P,0,P,-1,CompleteAbort⟩", "P", 0, true, 48, "", nil},
		{"⟨P,0,P,-1,Empty⟩", "P", 0, false, 48, "", nil},
		{"⟨P,0,P,-1,PrepareCommit,{a-0}⟩", "P", 0, true, 51, "", nil},
		{"⟨P,0,P,-1,PrepareCommit,{a-0}⟩", "P", 0, false, 48, "", nil},
		{"⟨P,0,P,-1,PrepareAbort,{a-0}⟩", "P", 0, false, 51, "", nil},
		{"⟨P,0,P,-1,PrepareAbort,{a-0}⟩", "P", 0, true, 48, "", nil},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidNames[tc.pid], ProducerEpoch: tc.epoch, Commit: tc.commit}, now0, nil))
		if a := w.only(); a.Code != tc.code {
			t.Errorf("%s EndTxn(%s,%d,commit=%v): code %d, want %d", tc.before, tc.pid, tc.epoch, tc.commit, a.Code, tc.code)
		}
		after := tc.after
		if after == "" {
			after = tc.before
		}
		if got := show(tx.Entry(), tx.Persisted()); got != after {
			t.Errorf("%s EndTxn(commit=%v): entry %s, want %s", tc.before, tc.commit, got, after)
		}
		if tc.trace != nil && !reflect.DeepEqual(w.trace, tc.trace) {
			t.Errorf("%s EndTxn(commit=%v): trace %q, want %q", tc.before, tc.commit, w.trace, tc.trace)
		}
		if tc.trace == nil && len(w.writes) != 0 {
			t.Errorf("%s EndTxn(commit=%v): wrote %q", tc.before, tc.commit, w.traced("write"))
		}
	}
}

// TestWriteFailures is R-GEN-3: a failed write is discarded (entry as
// before, nothing in flight) and answered COORDINATOR_NOT_AVAILABLE.
func TestWriteFailures(t *testing.T) {
	fail := func(txnstate.Entry) error { return errDisk }
	for _, tc := range []struct {
		name   string
		before string
		call   func(tx *Txn) Step
	}{
		{"AddPartitions", "⟨P,0,P,-1,Empty⟩", func(tx *Txn) Step {
			return tx.AddPartitions("r", AddPartitions{ProducerID: pidP, Partitions: tps("a-0")}, now0)
		}},
		{"AddOffsets", "⟨P,0,P,-1,Ongoing,{a-0}⟩", func(tx *Txn) Step {
			return tx.AddOffsets("r", AddOffsets{ProducerID: pidP, Group: "g"}, now0)
		}},
		{"EndTxn", "⟨P,0,P,-1,Ongoing,{a-0}⟩", func(tx *Txn) Step {
			return tx.EndTxn("r", EndTxn{ProducerID: pidP, Commit: true}, now0, nil)
		}},
		{"InitProducerId bump", "⟨P,0,P,-1,CompleteCommit⟩", func(tx *Txn) Step {
			return tx.InitProducerID("r", ipiReq(none), now0, newPIDs())
		}},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.persistErr = fail
		w.drive(tx, tc.call(tx))
		if a := w.only(); a.Code != kerr.CoordinatorNotAvailable.Code {
			t.Errorf("%s: answer %s, want 15", tc.name, showAnswer(a))
		}
		if got := show(tx.Entry(), true); got != tc.before || tx.InFlight() {
			t.Errorf("%s: entry %s (in flight %v), want %s", tc.name, got, tx.InFlight(), tc.before)
		}
	}
}

// TestFailedFence is R-IPI-14: when the PrepareAbort of a fence cannot be
// written, the rejoin gets 15, the entry stays Ongoing but client checks
// use the fence epoch f (the old producer is fenced), and the next fence
// attempt reuses f instead of bumping again.
func TestFailedFence(t *testing.T) {
	tx := load(t, "⟨P,5,P,4,Ongoing,{a-0}⟩")
	w := newWorld(t)
	w.persistErr = func(e txnstate.Entry) error { return errDisk }
	w.drive(tx, tx.InitProducerID("rejoin", ipiReq(none), now0, newPIDs()))
	if a := w.only(); a.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("rejoin answered %s, want 15", showAnswer(a))
	}
	if got := show(tx.Entry(), true); got != "⟨P,5,P,4,Ongoing,{a-0}⟩" {
		t.Fatalf("entry %s", got)
	}
	s := tx.AddPartitions("old", AddPartitions{ProducerID: pidP, ProducerEpoch: 5, Partitions: tps("a-1")}, now0)
	if s.Answer == nil || s.Answer.Code != kerr.ProducerFenced.Code {
		t.Fatalf("the old producer's AddPartitions: %+v, want 90", s)
	}
	s = tx.EndTxn("old", EndTxn{ProducerID: pidP, ProducerEpoch: 5, Commit: true}, now0, nil)
	if s.Answer == nil || s.Answer.Code != kerr.ProducerFenced.Code {
		t.Fatalf("the old producer's EndTxn: %+v, want 90", s)
	}
	// The reaper's attempt (R-TXN-9 refers to R-IPI-14) reuses epoch 6.
	w = newWorld(t)
	w.drive(tx, tx.Reap(now0.Add(time.Hour)))
	want := []string{"write ⟨P,6,P,-1,PrepareAbort,{a-0}⟩", "fence (P,6)", "marker ABORT a-0 (P,6)", "write ⟨P,6,P,-1,CompleteAbort⟩"}
	if !reflect.DeepEqual(w.trace, want) {
		t.Fatalf("trace %q, want %q", w.trace, want)
	}
}

// TestRejoinFenceFails is R-IPI-10 step 4 / R-IPI-13: a fence that fails
// after PrepareAbort is durable still lets the markers and CompleteAbort
// go out (R-TXN-3), and the rejoin is answered the fence's error.
func TestRejoinFenceFails(t *testing.T) {
	tx := load(t, "⟨P,5,P,4,Ongoing,{a-0}⟩")
	w := newWorld(t)
	w.fenceErr = errDisk
	w.drive(tx, tx.InitProducerID("rejoin", ipiReq(none), now0, newPIDs()))
	if a := w.only(); a.Code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("answer %s, want 15", showAnswer(a))
	}
	if got := show(tx.Entry(), true); got != "⟨P,6,P,-1,CompleteAbort⟩" {
		t.Fatalf("entry %s", got)
	}
}

// TestReaper is R-TXN-9 (S-41): an Ongoing transaction past
// txnStartMs + timeoutMs is aborted at a bumped, fenced epoch, nobody is
// answered; afterwards the old producer is fenced and a new session bumps
// past the fence epoch.
func TestReaper(t *testing.T) {
	tx := load(t, "⟨P,2,P,1,Ongoing,{a-0}⟩")
	deadline := time.UnixMilli(tx.Entry().TxnStartMs + 60000)
	if s := tx.Reap(deadline); s.Persist != nil {
		t.Fatal("aborted at the deadline, not past it")
	}
	w := newWorld(t)
	w.drive(tx, tx.Reap(deadline.Add(time.Millisecond)))
	want := []string{"write ⟨P,3,P,-1,PrepareAbort,{a-0}⟩", "fence (P,3)", "marker ABORT a-0 (P,3)", "write ⟨P,3,P,-1,CompleteAbort⟩"}
	if !reflect.DeepEqual(w.trace, want) {
		t.Fatalf("trace %q, want %q", w.trace, want)
	}
	if !reflect.DeepEqual(w.events, []Event{ReaperAbort, EpochBump, Aborted}) {
		t.Fatalf("events %v", w.events)
	}
	for _, tc := range []struct {
		name string
		s    Step
		code int16
	}{
		{"EndTxn (P,2)", tx.EndTxn("e", EndTxn{ProducerID: pidP, ProducerEpoch: 2, Commit: true}, now0, nil), kerr.ProducerFenced.Code},
		{"AddPartitions (P,2)", tx.AddPartitions("a", AddPartitions{ProducerID: pidP, ProducerEpoch: 2, Partitions: tps("a-0")}, now0), kerr.ProducerFenced.Code},
		{"InitProducerId claim (P,2)", tx.InitProducerID("i", ipiReq(claim{"P", 2}), now0, newPIDs()), kerr.ProducerFenced.Code},
	} {
		if tc.s.Answer == nil || tc.s.Answer.Code != tc.code || tc.s.Persist != nil {
			t.Errorf("%s: %+v, want %d", tc.name, tc.s, tc.code)
		}
	}
	w = newWorld(t)
	w.drive(tx, tx.InitProducerID("i", ipiReq(none), now0, newPIDs()))
	if a := w.only(); a.Code != 0 || a.Epoch != 4 {
		t.Fatalf("new session: %s, want (P,4)", showAnswer(a))
	}
	for _, st := range []string{"⟨P,2,P,1,Empty⟩", "⟨P,2,P,1,CompleteCommit⟩", "⟨P,2,P,1,PrepareCommit,{a-0}⟩"} {
		if s := load(t, st).Reap(now0.Add(24 * time.Hour)); s.Persist != nil {
			t.Errorf("the reaper wrote %s", st)
		}
	}
}

// TestMarkerAnswers is R-MRK-1 and R-MRK-2: NONE, 43 and 35 settle a
// partition; 47 and 52 settle it too (U-4); anything else is sent again
// after a backoff until it settles. Complete* waits for every partition.
func TestMarkerAnswers(t *testing.T) {
	for _, tc := range []struct {
		code    int16
		retried bool
	}{
		{0, false}, {43, false}, {35, false}, {47, false}, {52, false},
		{kerr.NotLeaderForPartition.Code, true}, {kerr.UnknownTopicOrPartition.Code, true},
		{kerr.RequestTimedOut.Code, true}, {kerr.KafkaStorageError.Code, true},
	} {
		tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0 a-1}⟩")
		w := newWorld(t)
		sent := map[int32]int{}
		w.markerCode = func(m Marker) int16 {
			sent[m.Key.TP.Partition]++
			if m.Key.TP.Partition == 1 && sent[1] == 1 {
				return tc.code
			}
			return 0
		}
		w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, Commit: true}, now0, nil))
		if a := w.only(); a.Code != 0 || tx.Entry().State != txnstate.CompleteCommit {
			t.Errorf("code %d: answer %s, state %s", tc.code, showAnswer(a), tx.Entry().State)
		}
		wantSends := 1
		if tc.retried {
			wantSends = 2
		}
		if sent[1] != wantSends || sent[0] != 1 {
			t.Errorf("code %d: a-1 sent %d times, a-0 %d; want %d and 1", tc.code, sent[1], sent[0], wantSends)
		}
		if tc.retried && !reflect.DeepEqual(w.traced("later"), []string{"later " + MarkerRetryBackoff.String()}) {
			t.Errorf("code %d: callbacks %q", tc.code, w.traced("later"))
		}
	}
}

// TestStaleMarkerAnswers: an answer or callback from an earlier round, or
// for a settled partition, changes nothing.
func TestStaleMarkerAnswers(t *testing.T) {
	tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0 a-1}⟩")
	w := newWorld(t)
	w.hold = true
	w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, Commit: true}, now0, nil))
	m := w.held[0]
	if s := tx.MarkerDone(m.Round-1, m.Key, 0, now0); !reflect.DeepEqual(s, Step{}) {
		t.Fatalf("an earlier round's answer: %+v", s)
	}
	tx.MarkerDone(m.Round, m.Key, 0, now0)
	if s := tx.MarkerDone(m.Round, m.Key, 0, now0); !reflect.DeepEqual(s, Step{}) {
		t.Fatalf("a settled partition's second answer: %+v", s)
	}
	if s := tx.Fire(Tick{Round: m.Round, Key: m.Key}, now0); !reflect.DeepEqual(s, Step{}) {
		t.Fatalf("a retry of a settled partition: %+v", s)
	}
	w.held = w.held[1:]
	w.release(tx)
	if tx.Entry().State != txnstate.CompleteCommit || tx.InFlight() {
		t.Fatalf("state %s in flight %v", tx.Entry().State, tx.InFlight())
	}
}

// TestCompleteIsNotWaitedFor is R-TXN-3 with the project's reading of
// R-MRK-1: once every marker is durable the outcome is, so EndTxn is
// answered as the entry becomes Complete*, and the next request is not
// held behind its write (which waits for the next transition, see
// TestCompleteWaitsForTheNextTransition). A failed Complete* write
// changes nothing in memory: the log is offline, so the next write fails
// too, and a restart resumes the durable Prepare* entry's markers.
func TestCompleteIsNotWaitedFor(t *testing.T) {
	for _, fail := range []bool{false, true} {
		tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
		w := newWorld(t)
		w.deferComplete = true
		w.persistErr = func(e txnstate.Entry) error {
			if e.State.IsComplete() && fail {
				return errDisk
			}
			return nil
		}
		var answered, unconfirmed bool
		s := tx.EndTxn("end", EndTxn{ProducerID: pidP, Commit: true}, now0, nil)
		w.push(tx, s)
		for len(w.queue) > 0 {
			next := w.queue[0]
			w.queue = w.queue[1:]
			s := next()
			if s.Answer != nil {
				answered = true
				if s.Answer.Code != 0 || s.Persist != nil || s.Later == nil || !s.Later.Tick.Complete {
					t.Fatalf("fail %v: the EndTxn answer came with %+v, want no write and the Complete* tick", fail, s)
				}
				if tx.Persisting() || tx.InFlight() || tx.Stable() || tx.Entry().State != txnstate.CompleteCommit {
					t.Fatalf("fail %v: persisting %v in flight %v stable %v state %s while Complete* is due",
						fail, tx.Persisting(), tx.InFlight(), tx.Stable(), tx.Entry().State)
				}
			}
			if s.Unconfirmed {
				unconfirmed = true
				if !answered || s.Persist == nil || s.Persist.State != txnstate.CompleteCommit {
					t.Fatalf("fail %v: Complete* written as %+v (answered %v)", fail, s, answered)
				}
			}
			w.push(tx, s)
		}
		if !unconfirmed {
			t.Fatalf("fail %v: Complete* never written (trace %q)", fail, w.trace)
		}
		if a := w.only(); a.Code != 0 || tx.Entry().State != txnstate.CompleteCommit || !tx.Stable() {
			t.Fatalf("fail %v: answer %s state %s stable %v", fail, showAnswer(a), tx.Entry().State, tx.Stable())
		}
	}
}

// TestCompleteWaitsForTheNextTransition: the Complete* entry is written
// on its own only when no later transition's whole entry covers it
// within CompleteDelay (one record per transaction fewer when they come
// back to back); a transition still in flight when the tick comes has
// it look again later, since that write may fail.
func TestCompleteWaitsForTheNextTransition(t *testing.T) {
	commit := func(w *world, tx *Txn) *Tick {
		t.Helper()
		var tick *Tick
		s := tx.EndTxn("end", EndTxn{ProducerID: pidP, Commit: true}, w.now, nil)
		w.push(tx, s)
		for len(w.queue) > 0 {
			next := w.queue[0]
			w.queue = w.queue[1:]
			s := next()
			if l := s.Later; l != nil && l.Tick.Complete {
				if l.After != CompleteDelay {
					t.Fatalf("Complete* tick after %v, want %v", l.After, CompleteDelay)
				}
				tick = &l.Tick
				s.Later = nil
			}
			w.push(tx, s)
		}
		if tick == nil {
			t.Fatalf("no Complete* tick (trace %q)", w.trace)
		}
		return tick
	}
	t.Run("covered by the next add", func(t *testing.T) {
		tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
		w := newWorld(t)
		w.deferComplete = true
		tick := commit(w, tx)
		if e, due := tx.CompleteDue(); !due || e.State != txnstate.CompleteCommit || tx.Stable() {
			t.Fatalf("due %v entry %s stable %v after the commit", due, e.State, tx.Stable())
		}
		w.drive(tx, tx.AddPartitions("add", AddPartitions{ProducerID: pidP, ProducerEpoch: 0, Partitions: tps("a-1")}, w.now))
		if _, due := tx.CompleteDue(); due {
			t.Fatal("the next add's write did not cover the Complete*")
		}
		w.drive(tx, tx.Fire(*tick, w.now))
		for _, e := range w.writes {
			if e.State.IsComplete() {
				t.Fatalf("Complete* written although the next add covered it: %q", w.trace)
			}
		}
		if tx.Entry().State != txnstate.Ongoing {
			t.Fatalf("state %s", tx.Entry().State)
		}
	})
	t.Run("written alone when nothing follows", func(t *testing.T) {
		tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
		w := newWorld(t)
		w.deferComplete = true
		tick := commit(w, tx)
		w.drive(tx, tx.Fire(*tick, w.now))
		if got := w.traced("write"); len(got) != 2 || got[1] != "write ⟨P,0,P,-1,CompleteCommit⟩" {
			t.Fatalf("writes %q", got)
		}
		if _, due := tx.CompleteDue(); due || !tx.Stable() {
			t.Fatalf("due %v stable %v after the Complete* write", due, tx.Stable())
		}
	})
	t.Run("a failed next write leaves it due", func(t *testing.T) {
		tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
		w := newWorld(t)
		w.deferComplete = true
		tick := commit(w, tx)
		// The next add's write is in flight when the tick comes: look
		// again later.
		s := tx.AddPartitions("add", AddPartitions{ProducerID: pidP, ProducerEpoch: 0, Partitions: tps("a-1")}, w.now)
		if s.Persist == nil {
			t.Fatalf("add wrote nothing: %+v", s)
		}
		if again := tx.Fire(*tick, w.now); again.Persist != nil || again.Later == nil || !again.Later.Tick.Complete {
			t.Fatalf("tick during the add's write: %+v, want another tick", again)
		}
		tx.PersistDone(errDisk, w.now)
		if e, due := tx.CompleteDue(); !due || e.State != txnstate.CompleteCommit {
			t.Fatalf("due %v state %s after the add's write failed", due, e.State)
		}
		s = tx.Fire(*tick, w.now)
		if s.Persist == nil || !s.Unconfirmed || s.Persist.State != txnstate.CompleteCommit {
			t.Fatalf("tick after the failed add: %+v, want the Complete* write", s)
		}
	})
}

// TestResume is R-TXN-3 / R-MRK-1 (S-47): a Prepare* entry found at start
// sends its markers and reaches Complete* with nobody to answer.
func TestResume(t *testing.T) {
	for _, tc := range []struct{ before, marker, after string }{
		{"⟨P,3,P,-1,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,3)", "⟨P,3,P,-1,CompleteCommit⟩"},
		{"⟨P,3,P,-1,PrepareAbort,{a-0}⟩", "marker ABORT a-0 (P,3)", "⟨P,3,P,-1,CompleteAbort⟩"},
	} {
		tx := load(t, tc.before)
		w := newWorld(t)
		w.drive(tx, tx.Resume(now0))
		if want := []string{tc.marker, "write " + tc.after}; !reflect.DeepEqual(w.trace, want) {
			t.Errorf("trace %q, want %q", w.trace, want)
		}
	}
	if s := load(t, "⟨P,3,P,-1,Ongoing,{a-0}⟩").Resume(now0); !reflect.DeepEqual(s, Step{}) {
		t.Errorf("resumed an Ongoing entry: %+v", s)
	}
}

// TestExpiry is R-IPI-15: an Empty/Complete* entry not updated for
// transactional.id.expiration.ms is deleted; the next InitProducerId then
// starts afresh with a new PID, any claim accepted (R-IPI-6).
func TestExpiry(t *testing.T) {
	const expiration = 7 * 24 * time.Hour
	e, _ := ent(t, "⟨P,4,P,3,CompleteCommit⟩")
	e.LastUpdateMs = now0.UnixMilli()
	if Expired(e, now0.Add(expiration-time.Millisecond), expiration) || !Expired(e, now0.Add(expiration), expiration) {
		t.Fatal("expiry is at lastUpdateMs + expiration")
	}
	for _, st := range []txnstate.State{txnstate.Ongoing, txnstate.PrepareCommit, txnstate.PrepareAbort} {
		o := e
		o.State = st
		if Expired(o, now0.Add(10*expiration), expiration) {
			t.Errorf("%s expired", st)
		}
	}
	tx := New("t", e, true, nil)
	w := newWorld(t)
	w.drive(tx, tx.Expire(now0.Add(expiration), expiration))
	if !reflect.DeepEqual(w.trace, []string{"delete"}) || tx.Persisted() || !tx.Stable() {
		t.Fatalf("trace %q persisted %v", w.trace, tx.Persisted())
	}
	w = newWorld(t)
	w.drive(tx, tx.InitProducerID("i", ipiReq(claim{"P", 4}), now0, newPIDs()))
	if a := w.only(); a.Code != 0 || a.ProducerID != pidM || a.Epoch != 0 {
		t.Fatalf("after expiry: %s, want 0 (M,0)", showAnswer(a))
	}
	if s := New("t", e, true, nil).Expire(now0, expiration); !reflect.DeepEqual(s, Step{}) {
		t.Fatalf("expired too early: %+v", s)
	}
}

// TestVerify is R-PV-6 (transactional produce) and R-TXN-11
// (TxnOffsetCommit) against the persisted entry.
func TestVerify(t *testing.T) {
	a0 := model.TopicPartition{Topic: "a", Partition: 0}
	for _, tc := range []struct {
		entry string
		pid   int64
		epoch int16
		code  int16
	}{
		{"", pidP, 0, 49},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", pidQ, 0, 49},
		{"⟨P,1,P,-1,Ongoing,{a-0}⟩", pidP, 0, 47},
		{"⟨P,0,P,-1,PrepareCommit,{a-0}⟩", pidP, 0, 19},
		{"⟨P,0,P,-1,Ongoing,{a-1}⟩", pidP, 0, 48},
		{"⟨P,0,P,-1,Empty⟩", pidP, 0, 48},
		{"⟨P,0,P,-1,Ongoing,{a-0}⟩", pidP, 0, 0},
	} {
		e, ok := ent(t, tc.entry)
		if got := Verify(e, ok, tc.pid, tc.epoch, a0, 19); got != tc.code {
			t.Errorf("%s (%d,%d): %d, want %d", tc.entry, tc.pid, tc.epoch, got, tc.code)
		}
	}
}

// TestStable: an actor may stop only with nothing in flight and nothing
// for the reaper or a resume to watch.
func TestStable(t *testing.T) {
	for s, want := range map[string]bool{
		"":                               true,
		"⟨P,0,P,-1,Empty⟩":               true,
		"⟨P,0,P,-1,CompleteAbort⟩":       true,
		"⟨P,0,P,-1,Ongoing,{a-0}⟩":       false,
		"⟨P,0,P,-1,PrepareCommit,{a-0}⟩": false,
	} {
		if got := load(t, s).Stable(); got != want {
			t.Errorf("%q: stable %v, want %v", s, got, want)
		}
	}
}

// TestRefusedCompleteIsWrittenAgain: a Complete* a cluster broker refused
// to write (its lease in doubt, ErrRefused: the log intact) is written
// again after RewriteBackoff, and the entry is not Stable until it is —
// else, with no later transition, the durable entry (which
// ListTransactions answers from) said PrepareCommit for ever. A failed
// log (any other error) is not written again.
func TestRefusedCompleteIsWrittenAgain(t *testing.T) {
	refused := fmt.Errorf("lease in doubt (%w)", ErrRefused)
	tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
	w := newWorld(t)
	refusals := 2
	w.persistErr = func(e txnstate.Entry) error {
		if e.State.IsComplete() && refusals > 0 {
			refusals--
			return refused
		}
		return nil
	}
	w.drive(tx, tx.EndTxn("end", EndTxn{ProducerID: pidP, Commit: true}, now0, nil))
	want := []string{"write ⟨P,0,P,-1,PrepareCommit,{a-0}⟩", "marker COMMIT a-0 (P,0)", "write ⟨P,0,P,-1,CompleteCommit⟩", "answer 0",
		"later 1s", "write ⟨P,0,P,-1,CompleteCommit⟩", "later 1s", "write ⟨P,0,P,-1,CompleteCommit⟩"}
	if !reflect.DeepEqual(w.trace, want) {
		t.Fatalf("trace %q\nwant  %q", w.trace, want)
	}
	if !tx.Stable() {
		t.Fatal("not stable once the Complete* is durable")
	}

	// Refused, then a new transition starts before the rewrite is due:
	// its own write carries the whole entry, so nothing is rewritten.
	tx = load(t, "⟨P,0,P,-1,Ongoing,{a-0}⟩")
	w = newWorld(t)
	w.persistErr = func(e txnstate.Entry) error {
		if e.State.IsComplete() {
			return refused
		}
		return nil
	}
	s := tx.EndTxn("end", EndTxn{ProducerID: pidP, Commit: true}, now0, nil)
	var rewrite *Tick
	w.push(tx, s)
	for len(w.queue) > 0 {
		next := w.queue[0]
		w.queue = w.queue[1:]
		s := next()
		if s.Later != nil && s.Later.Tick.Rewrite {
			rewrite = &s.Later.Tick
			continue
		}
		w.push(tx, s)
	}
	if rewrite == nil || tx.Stable() {
		t.Fatalf("refused Complete*: rewrite %v, stable %v", rewrite, tx.Stable())
	}
	w.persistErr = nil
	w.drive(tx, tx.AddPartitions("add", AddPartitions{ProducerID: pidP, Partitions: []model.TopicPartition{{Topic: "b"}}}, now0))
	if got := tx.Fire(*rewrite, now0); !reflect.DeepEqual(got, Step{}) {
		t.Fatalf("rewrite after a later transition: %+v", got)
	}
	if tx.Entry().State != txnstate.Ongoing {
		t.Fatalf("state %s", tx.Entry().State)
	}
}
