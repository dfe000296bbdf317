package partition

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog"
	"kaas/storage/partlog/batchtest"
)

// localCoordinator verifies every batch (an in-process coordinator that
// counts the partition in the transaction).
type localCoordinator struct{}

func (localCoordinator) VerifyTxn(string, int64, int16, string, int32) int16 { return 0 }

func (f *fixture) tv2Batch(pid int64, epoch int16, seq int32) <-chan messages.ProduceResult {
	id := "tx"
	ch := make(chan messages.ProduceResult, 1)
	f.h.Produce(&messages.Produce{
		Batch: batchtest.Build(batchtest.Opts{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
			Attributes: partlog.AttrTransactional, Timestamp: 1}, "v"),
		Acks: -1, TransactionalID: &id, AddToTxn: true,
		Reply: func(r messages.ProduceResult) { ch <- r },
	})
	return ch
}

func (f *fixture) awaiting(t *testing.T) int {
	t.Helper()
	return f.h.state(nil).(Summary).AwaitingMarker
}

// R-TV2-7: a TV2 batch at an epoch above its producer's transaction still
// open here (the next transaction's, sent once EndTxn answered before the
// marker) waits for that transaction's marker, with the producer's later
// batch behind it, and then opens the new transaction after the marker —
// not inside the old one.
func TestLaterTransactionsBatchWaitsForTheMarker(t *testing.T) {
	f := open(t, t.TempDir(), func(c *Config) { c.Verifier = localCoordinator{} })
	if r := wait(t, f.tv2Batch(7, 0, 0)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("transaction N's batch: %+v", r)
	}
	next := f.tv2Batch(7, 1, 0)
	after := f.tv2Batch(7, 1, 1)
	eventually(t, "the next transaction's batch is not waiting for the marker", func() bool { return f.awaiting(t) == 1 })
	select {
	case r := <-next:
		t.Fatalf("answered before the marker: %+v", r)
	case r := <-after:
		t.Fatalf("the batch behind it answered before the marker: %+v", r)
	default:
	}
	done := make(chan int16, 1)
	f.h.Send(&messages.WriteMarker{ProducerID: 7, ProducerEpoch: 1, Commit: true, Reply: func(c int16) { done <- c }})
	if c := wait(t, done); c != 0 {
		t.Fatalf("marker: %v", kerr.ErrorForCode(c))
	}
	if r := wait(t, next); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("the next transaction's batch: %+v, want appended at 2, after the marker at 1", r)
	}
	if r := wait(t, after); r.ErrorCode != 0 || r.BaseOffset != 3 {
		t.Fatalf("the batch behind it: %+v, want appended at 3", r)
	}
	if e := f.awaiting(t); e != 0 {
		t.Fatalf("%d still awaiting", e)
	}
}

// A marker that does not come within markerAwait lets the batch go on
// as it would have without the wait (to the coordinator's verdict).
func TestMarkerAwaitIsBounded(t *testing.T) {
	was := markerAwait
	markerAwait = 20 * time.Millisecond
	t.Cleanup(func() { markerAwait = was })
	f := open(t, t.TempDir(), func(c *Config) { c.Verifier = localCoordinator{} })
	if r := wait(t, f.tv2Batch(7, 0, 0)); r.ErrorCode != 0 {
		t.Fatalf("transaction N's batch: %+v", r)
	}
	if r := wait(t, f.tv2Batch(7, 1, 0)); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("after the bound: %+v, want the coordinator's verdict (appended at 1)", r)
	}
}

// refusingCoordinator has moved on from the producer's epoch (its
// transaction was ended and answered before this partition's marker).
type refusingCoordinator struct{}

func (refusingCoordinator) VerifyTxn(string, int64, int16, string, int32) int16 {
	return kerr.InvalidProducerEpoch.Code
}

// R-TV2-7: a transaction found open in the log at start (a restart, or a
// cluster broker taking the partition over) was not appended by this
// actor, and the end fence that guarded it lived elsewhere: its
// producer's next batch is verified with the coordinator before it may
// join it — refused once the coordinator has moved on, appended while it
// has not — and a retry of a batch it wrote is still answered as that
// batch.
func TestRecoveredOpenTransactionVerifiesFirst(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, func(c *Config) { c.Verifier = localCoordinator{} })
	if r := wait(t, f.tv2Batch(7, 0, 0)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", r)
	}
	f.stop()

	g := open(t, dir, func(c *Config) { c.Verifier = refusingCoordinator{} })
	if r := wait(t, g.tv2Batch(7, 0, 0)); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("a retry of the written batch after recovery: %+v, want its duplicate at 0", r)
	}
	// Not appended: out to the coordinator, whose add refuses it
	// (PRODUCER_FENCED, answered INVALID_PRODUCER_EPOCH: R-TV2-5).
	if r := wait(t, g.tv2Batch(7, 0, 1)); r.ErrorCode != VerifyRemotely {
		t.Fatalf("a late batch of the recovered transaction, the coordinator moved on: %+v, want it sent to the coordinator", r)
	}
	if end := g.h.View().EndOffset; end != 1 {
		t.Fatalf("log end %d after the late batch, want 1", end)
	}
	g.stop()

	h := open(t, dir, func(c *Config) { c.Verifier = localCoordinator{} })
	if r := wait(t, h.tv2Batch(7, 0, 1)); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("the recovered transaction's next batch, still ongoing at the coordinator: %+v, want appended at 1", r)
	}
}
