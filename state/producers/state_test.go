package producers

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// batch is a data batch header for producer pid at epoch, base sequence
// seq, n records, at base offset off.
func batch(pid int64, epoch int16, seq int32, n int32, off int64, txn bool) Batch {
	return Batch{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		LastOffsetDelta: n - 1, BaseOffset: off, MaxTimestamp: 1000 + off, Transactional: txn}
}

// appendAll applies a sequence of accepted batches, failing on a rejection.
func appendAll(t *testing.T, s *State, hs ...Batch) {
	t.Helper()
	for _, h := range hs {
		if d := s.Check(h); d.Code != 0 || d.Duplicate != nil {
			t.Fatalf("setup batch %+v: %+v", h, d)
		}
		s.Apply(h)
	}
}

func TestLastSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ base, delta, want int32 }{
		{0, 0, 0}, {5, 2, 7}, {math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32 - 1, 2, 0}, {math.MaxInt32, 1, 0}, {-1, 3, -1},
	} {
		if got := LastSequence(tc.base, tc.delta); got != tc.want {
			t.Errorf("LastSequence(%d,%d) = %d, want %d", tc.base, tc.delta, got, tc.want)
		}
	}
}

// Table of R-PV-7..10 decisions after a common history: producer 1 wrote
// seq 0–2 (offsets 0–2) and seq 3–4 (offsets 3–4) at epoch 1.
func TestCheckProducerStateRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       Batch
		code    int16
		dupBase int64 // -1: not a duplicate
	}{
		{"S-19 exact retry is a duplicate", batch(1, 1, 0, 3, 0, false), 0, 0},
		{"retry of the newest batch", batch(1, 1, 3, 2, 0, false), 0, 3},
		{"next sequence appends", batch(1, 1, 5, 1, 0, false), 0, -1},
		{"S-20 gap is out of order", batch(1, 1, 6, 1, 0, false), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"overlap without exact match", batch(1, 1, 4, 2, 0, false), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"S-23 stale epoch", batch(1, 0, 5, 1, 0, false), kerr.InvalidProducerEpoch.Code, -1},
		{"S-23 newer epoch needs sequence 0", batch(1, 2, 5, 1, 0, false), kerr.OutOfOrderSequenceNumber.Code, -1},
		{"S-23 newer epoch at sequence 0", batch(1, 2, 0, 1, 0, false), 0, -1},
		{"S-22 unknown producer starts anywhere", batch(4242, 0, 42, 1, 0, false), 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(nil)
			appendAll(t, s, batch(1, 1, 0, 3, 0, false), batch(1, 1, 3, 2, 3, false))
			d := s.Check(tc.h)
			if d.Code != tc.code {
				t.Fatalf("code %d, want %d", d.Code, tc.code)
			}
			if tc.dupBase < 0 && d.Duplicate != nil || tc.dupBase >= 0 && (d.Duplicate == nil || d.Duplicate.FirstOffset != tc.dupBase) {
				t.Fatalf("duplicate = %+v, want base %d", d.Duplicate, tc.dupBase)
			}
		})
	}
}

// R-PV-9c: only the last five batches are remembered; an older retry is
// out of order (S-21).
func TestWindowKeepsFiveBatches(t *testing.T) {
	s := New(nil)
	for i := int32(0); i < 6; i++ {
		appendAll(t, s, batch(1, 0, i, 1, int64(i), false))
	}
	if d := s.Check(batch(1, 0, 0, 1, 0, false)); d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("retry outside the window: %+v", d)
	}
	if d := s.Check(batch(1, 0, 1, 1, 0, false)); d.Duplicate == nil || d.Duplicate.FirstOffset != 1 {
		t.Fatalf("retry inside the window: %+v", d)
	}
}

// S-24: sequences wrap from int32 max to 0.
func TestSequenceWrapsAtInt32Max(t *testing.T) {
	s := New(nil)
	appendAll(t, s, batch(9, 0, math.MaxInt32-1, 3, 0, false)) // last seq 0
	if d := s.Check(batch(9, 0, 1, 1, 3, false)); d.Code != 0 {
		t.Fatalf("seq after wrap: %+v", d)
	}
	if d := s.Check(batch(9, 0, 3, 1, 3, false)); d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap after wrap: %+v", d)
	}
	s2 := New(nil)
	appendAll(t, s2, batch(9, 0, math.MaxInt32, 1, 0, false))
	if d := s2.Check(batch(9, 0, 0, 1, 1, false)); d.Code != 0 {
		t.Fatalf("0 after int32 max: %+v", d)
	}
}

// R-PV-10 (S-29): a non-transactional batch while a transaction is open.
func TestNonTransactionalBatchInsideTransaction(t *testing.T) {
	s := New(nil)
	appendAll(t, s, batch(1, 0, 0, 1, 0, true))
	if d := s.Check(batch(1, 0, 1, 1, 1, false)); d.Code != kerr.InvalidTxnState.Code {
		t.Fatalf("got %+v", d)
	}
	if got := s.OpenTxnFirstOffset(); got != 0 {
		t.Fatalf("open transaction first offset %d", got)
	}
}

// R-PV-7a: a transactional batch is a duplicate only of a batch of the
// transaction open now. Issue 21's history: producer 1's transaction
// wrote seq 0 and seq 1 at epoch 0 and was aborted; the next transaction
// sends seq 1 again (the client thought it never landed). It is not the
// aborted batch's retry — answering it as one would acknowledge records
// only the aborted transaction holds — so it is out of order. A retry
// inside the open transaction is still a duplicate.
func TestTransactionalRetryOnlyWithinItsTransaction(t *testing.T) {
	s := New(nil)
	appendAll(t, s, batch(1, 0, 0, 1, 0, true), batch(1, 0, 1, 1, 1, true))
	if d := s.Check(batch(1, 0, 1, 1, 0, true)); d.Duplicate == nil || d.Duplicate.FirstOffset != 1 {
		t.Fatalf("retry inside the open transaction: %+v, want a duplicate at 1", d)
	}
	if _, ok := s.ApplyMarker(1, 0, 0, 2, 0); !ok {
		t.Fatal("the abort marker closed no transaction")
	}
	if d := s.Check(batch(1, 0, 1, 1, 0, true)); d.Duplicate != nil || d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("the ended transaction's sequence in a new one: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", d)
	}
	appendAll(t, s, batch(1, 0, 2, 1, 3, true)) // the next transaction's first batch
	if d := s.Check(batch(1, 0, 1, 1, 0, true)); d.Duplicate != nil || d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("an ended transaction's batch inside the next one: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", d)
	}
	if d := s.Check(batch(1, 0, 2, 1, 0, true)); d.Duplicate == nil || d.Duplicate.FirstOffset != 3 {
		t.Fatalf("retry of the open transaction's batch: %+v, want a duplicate at 3", d)
	}
	// An idempotent (non-transactional) producer keeps Apache's rule.
	appendAll(t, s, batch(2, 0, 0, 1, 4, false))
	if d := s.Check(batch(2, 0, 0, 1, 0, false)); d.Duplicate == nil {
		t.Fatalf("idempotent retry: %+v", d)
	}
}

// seed: fence_bumps_epoch_and_clears_window (R-FEN-2): a fence raises the
// producer's epoch and clears its duplicate window, keeping its open
// transaction.
func TestFenceBumpsEpochAndClearsWindow(t *testing.T) {
	floors := NewFloors()
	s := New(floors)
	appendAll(t, s, batch(1, 1, 0, 1, 0, true))
	floors.Raise(1, 2)
	if d := s.Check(batch(1, 1, 1, 1, 1, true)); d.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie batch: %+v", d)
	}
	e := s.Entry(1)
	if e.Epoch != 2 || len(e.Window) != 0 || e.TxnFirstOffset != 0 {
		t.Fatalf("entry after fence: %+v (window cleared, open transaction kept)", e)
	}
	if d := s.Check(batch(1, 2, 1, 1, 1, true)); d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("first batch at the fenced epoch must start at 0: %+v", d)
	}
	if floors.Raise(1, 1) || s.Entry(1).Epoch != 2 {
		t.Fatal("a lower fence lowered the epoch")
	}
}

// R-FEN-2: a producer this partition never saw is fenced through the
// broker-wide floor.
func TestFloorFencesUnseenProducers(t *testing.T) {
	floors := NewFloors()
	s := New(floors)
	floors.Raise(7, 5)
	if d := s.Check(batch(7, 4, 0, 1, 0, false)); d.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("zombie on an untouched partition: %+v", d)
	}
	if d := s.Check(batch(7, 5, 3, 1, 0, false)); d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("fenced epoch must start at sequence 0: %+v", d)
	}
	if d := s.Check(batch(7, 5, 0, 1, 0, false)); d.Code != 0 {
		t.Fatalf("new session: %+v", d)
	}
}

// R-PV-13 / R-MRK-4: markers check epochs and coordinator epochs and close
// the open transaction.
func TestMarkers(t *testing.T) {
	s := New(nil)
	appendAll(t, s, batch(1, 2, 0, 3, 0, true))
	if code := s.CheckMarker(1, 1, 5); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("stale marker: %d", code)
	}
	done, ok := s.ApplyMarker(1, 2, 5, 3, 0)
	if !ok || done.FirstOffset != 0 || done.LastOffset != 3 {
		t.Fatalf("completed %+v %v", done, ok)
	}
	if code := s.CheckMarker(1, 2, 4); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("older coordinator epoch: %d", code)
	}
	// Same epoch keeps the window: sequences continue across transactions.
	if d := s.Check(batch(1, 2, 3, 1, 4, true)); d.Code != 0 {
		t.Fatalf("next transaction at the same epoch: %+v", d)
	}
}

// R-TV2-7: an end floor refuses new data below it on every partition of
// the broker, but a retry of a batch written in the ended transaction is
// still answered as a duplicate (as Apache before the marker), the
// marker at the bumped epoch passes and closes the transaction, and the
// next transaction's batch at the bumped epoch is taken.
func TestEndFloorRefusesNewDataOnly(t *testing.T) {
	floors := NewFloors()
	s := New(floors)
	appendAll(t, s, batch(1, 3, 0, 2, 0, true))
	floors.RaiseEnd(1, 4)
	if d := s.Check(batch(1, 3, 0, 2, 0, true)); d.Code != 0 || d.Duplicate == nil || d.Duplicate.FirstOffset != 0 {
		t.Fatalf("retry of a written batch of the ended transaction: %+v, want its duplicate", d)
	}
	if d := s.Check(batch(1, 3, 2, 1, 2, true)); d.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("new data of the ended transaction: %+v, want INVALID_PRODUCER_EPOCH", d)
	}
	if d := New(floors).Check(batch(1, 3, 0, 1, 0, true)); d.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("late data on a partition that never saw the producer: %+v", d)
	}
	if e := s.Entry(1); e.Epoch != 3 || len(e.Window) != 1 || !e.HasOpenTxn() {
		t.Fatalf("entry under an end floor: %+v, want it untouched", e)
	}
	if code := s.CheckMarker(1, 4, 0); code != 0 {
		t.Fatalf("the marker at the bumped epoch: %d", code)
	}
	if _, closed := s.ApplyMarker(1, 4, 0, 2, 0); !closed {
		t.Fatal("the marker did not close the transaction")
	}
	if d := s.Check(batch(1, 4, 0, 1, 3, true)); d.Code != 0 || d.Duplicate != nil {
		t.Fatalf("the next transaction's first batch: %+v", d)
	}
	floors.RaiseEnd(1, 2)
	if e, _ := floors.End(1); e != 4 {
		t.Fatalf("a lower end floor lowered it: %d", e)
	}
	floors.DropEnd(1, 3)
	if _, ok := floors.End(1); !ok {
		t.Fatal("dropped for another epoch")
	}
	floors.DropEnd(1, 4)
	if _, ok := floors.End(1); ok {
		t.Fatal("not dropped")
	}
}
