package partition

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog"
	"kaas/storage/partlog/batchtest"
)

// remoteCoordinator plays a transaction coordinator on a peer broker: a
// batch for a partition it does not count in the transaction yet goes out
// to it (VerifyRemotely); once it has added the partition, the in-process
// check answers 0, as the broker's published entries would.
type remoteCoordinator struct {
	mu    sync.Mutex
	added bool
}

func (c *remoteCoordinator) VerifyTxn(string, int64, int16, string, int32) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.added {
		return 0
	}
	return VerifyRemotely
}

func (c *remoteCoordinator) add() {
	c.mu.Lock()
	c.added = true
	c.mu.Unlock()
}

func txnBatch(pid int64, seq int32, values ...string) []byte {
	return batchtest.Build(batchtest.Opts{
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq,
		Attributes: partlog.AttrTransactional, Timestamp: 1,
	}, values...)
}

// produceTxn sends a TV2 transactional batch (the implicit add) and
// returns its answer channel.
func (f *fixture) produceTxn(batch []byte, verified bool, gen uint64, code int16) <-chan messages.ProduceResult {
	id := "txn"
	ch := make(chan messages.ProduceResult, 1)
	f.h.Produce(&messages.Produce{
		Batch: batch, Acks: -1, TransactionalID: &id, AddToTxn: true,
		Verified: verified, VerifiedGen: gen, VerifyCode: code,
		Reply: func(r messages.ProduceResult) { ch <- r },
	})
	return ch
}

// TestBatchesWaitBehindTheirProducersBatchAtTheCoordinator: a pipelining
// producer's second batch arrives while its first is out at the
// coordinator. It is held — not checked against a log that lacks the
// first batch (that was OUT_OF_ORDER_SEQUENCE_NUMBER for a producer that
// did nothing wrong) — and appended after the first, in order, once the
// first comes back verified. Another producer is not held.
func TestBatchesWaitBehindTheirProducersBatchAtTheCoordinator(t *testing.T) {
	coord := &remoteCoordinator{}
	f := open(t, t.TempDir(), func(c *Config) { c.Verifier = coord })

	first := wait(t, f.produceTxn(txnBatch(7, 0, "a", "b"), false, 0, 0))
	if first.ErrorCode != VerifyRemotely {
		t.Fatalf("first batch: code %d, want VerifyRemotely", first.ErrorCode)
	}
	// The coordinator adds the partition while the first batch's answer
	// is on its way back: the producer's next batches would now pass the
	// in-process check, ahead of the first.
	coord.add()
	second := f.produceTxn(txnBatch(7, 2, "c"), false, 0, 0)
	third := f.produceTxn(txnBatch(7, 3, "d"), false, 0, 0)

	// A different producer goes straight through.
	other := wait(t, f.produceTxn(txnBatch(8, 0, "x"), false, 0, 0))
	if other.ErrorCode != 0 || other.BaseOffset != 0 {
		t.Fatalf("other producer: %+v, want appended at 0", other)
	}
	select {
	case r := <-second:
		t.Fatalf("second batch answered while the first is out at the coordinator: %+v", r)
	default:
	}

	// The first batch comes back verified at the generation it was sent
	// with; then the held batches follow it, in order.
	r1 := wait(t, f.produceTxn(txnBatch(7, 0, "a", "b"), true, first.MarkerGen, 0))
	r2, r3 := wait(t, second), wait(t, third)
	for i, r := range []messages.ProduceResult{r1, r2, r3} {
		if r.ErrorCode != 0 {
			t.Fatalf("batch %d: code %d (%s)", i+1, r.ErrorCode, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if r1.BaseOffset != 1 || r2.BaseOffset != 3 || r3.BaseOffset != 4 {
		t.Fatalf("offsets %d %d %d, want 1 3 4 (after the other producer's 0)", r1.BaseOffset, r2.BaseOffset, r3.BaseOffset)
	}
}

// TestHeldBatchesFollowACoordinatorRefusal: the coordinator refuses the
// batch that was out (here the producer was fenced meanwhile). The batch
// is answered with the refusal, in its turn, and the producer's held
// batches are released to be checked on their own — never left waiting.
func TestHeldBatchesFollowACoordinatorRefusal(t *testing.T) {
	coord := &remoteCoordinator{}
	f := open(t, t.TempDir(), func(c *Config) { c.Verifier = coord })

	first := wait(t, f.produceTxn(txnBatch(7, 0, "a"), false, 0, 0))
	if first.ErrorCode != VerifyRemotely {
		t.Fatalf("first batch: code %d, want VerifyRemotely", first.ErrorCode)
	}
	second := f.produceTxn(txnBatch(7, 1, "b"), false, 0, 0)

	r1 := wait(t, f.produceTxn(txnBatch(7, 0, "a"), true, first.MarkerGen, kerr.ProducerFenced.Code))
	if r1.ErrorCode != kerr.ProducerFenced.Code {
		t.Fatalf("refused batch: code %d, want PRODUCER_FENCED", r1.ErrorCode)
	}
	// Released, the second batch is checked on its own: the coordinator
	// never added the partition, so it goes out to it in turn.
	r2 := wait(t, second)
	if r2.ErrorCode != VerifyRemotely {
		t.Fatalf("held batch after the refusal: code %d, want VerifyRemotely", r2.ErrorCode)
	}
}

// TestHeldBatchesAreAnsweredWhenThePartitionStops: a partition closing
// with batches held answers them NOT_LEADER_OR_FOLLOWER (the client finds
// the new leader) instead of leaving their requests hanging.
func TestHeldBatchesAreAnsweredWhenThePartitionStops(t *testing.T) {
	coord := &remoteCoordinator{}
	f := open(t, t.TempDir(), func(c *Config) { c.Verifier = coord })

	if r := wait(t, f.produceTxn(txnBatch(7, 0, "a"), false, 0, 0)); r.ErrorCode != VerifyRemotely {
		t.Fatalf("first batch: code %d, want VerifyRemotely", r.ErrorCode)
	}
	held := f.produceTxn(txnBatch(7, 1, "b"), false, 0, 0)
	f.stop()
	if r := wait(t, held); r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("held batch at stop: code %d, want NOT_LEADER_OR_FOLLOWER", r.ErrorCode)
	}
}
