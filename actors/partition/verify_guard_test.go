package partition

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog"
	"kaas/storage/partlog/batchtest"
)

// remoteVerifier sends every verification to the coordinator, as for a
// transaction coordinated by a peer or a TV2 implicit add.
type remoteVerifier struct{}

func (remoteVerifier) VerifyTxn(string, int64, int16, string, int32) int16 { return VerifyRemotely }

// txnProduce sends a transactional batch of pid; the first answer is
// VerifyRemotely, whose marker generation the caller sends back with
// verified.
func (f *fixture) txnProduce(t *testing.T, pid int64) (m *messages.Produce, answers chan messages.ProduceResult) {
	t.Helper()
	id := "tx"
	answers = make(chan messages.ProduceResult, 2)
	m = &messages.Produce{
		Batch: batchtest.Build(batchtest.Opts{ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0,
			Attributes: partlog.AttrTransactional, Timestamp: 1}, "v"),
		Acks: -1, TransactionalID: &id, AddToTxn: true,
		Reply: func(r messages.ProduceResult) { answers <- r },
	}
	f.h.Produce(m)
	if r := wait(t, answers); r.ErrorCode != VerifyRemotely {
		t.Fatalf("producer %d's first batch: %+v, want VerifyRemotely", pid, r)
	}
	return m, answers
}

// verified sends m back as the coordinator's yes at generation gen.
func (f *fixture) verified(t *testing.T, m *messages.Produce, answers chan messages.ProduceResult, gen uint64) messages.ProduceResult {
	t.Helper()
	m.Verified, m.VerifiedGen, m.VerifyCode = true, gen, 0
	f.h.Produce(m)
	return wait(t, answers)
}

func (f *fixture) marker(t *testing.T, pid int64) {
	t.Helper()
	done := make(chan int16, 1)
	f.h.Send(&messages.WriteMarker{ProducerID: pid, ProducerEpoch: 0, Commit: true, Reply: func(c int16) { done <- c }})
	if c := wait(t, done); c != 0 {
		t.Fatalf("marker for %d: %v", pid, kerr.ErrorForCode(c))
	}
}

// A batch verified at the coordinator is appended unless a marker of its
// own producer was written while it was out (that marker may have ended
// the transaction it was verified in: R-PV-6); another producer's marker
// meanwhile does not send it back.
func TestVerifiedBatchIsGuardedByItsProducersMarkersOnly(t *testing.T) {
	f := open(t, t.TempDir(), func(c *Config) { c.Verifier = remoteVerifier{} })

	a, aAnswers := f.txnProduce(t, 1)
	gen := uint64(0) // no marker yet: the generation VerifyRemotely carried
	b, bAnswers := f.txnProduce(t, 2)
	f.marker(t, 2)                                                                   // producer 2 (nothing open) ends a transaction meanwhile
	if r := f.verified(t, a, aAnswers, gen); r.ErrorCode != 0 || r.BaseOffset != 1 { // after the marker at 0
		t.Fatalf("producer 1's batch after producer 2's marker: %+v, want appended", r)
	}
	if r := f.verified(t, b, bAnswers, gen); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("producer 2's batch after its own marker: %+v, want NOT_ENOUGH_REPLICAS", r)
	}

	// A batch the actor never sent out (as after a restart) verifies again.
	c, cAnswers := f.txnProduce(t, 3)
	c.Verified, c.VerifiedGen = true, 99
	f.h.Produce(c)
	if r := wait(t, cAnswers); r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("a batch verified at a generation ahead of the actor's: %+v", r)
	}
}
