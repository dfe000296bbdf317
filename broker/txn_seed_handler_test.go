package broker

// Ports of the KIP-360 seed's handler tests (seed 000_0adb7066508d56af,
// "How it's verified": init_producer_id.rs), through the wire against a
// broker started in the test. The store-level ones are in actors/txn.

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"kaas/model/txnstate"
)

// transactional_rejoin_bumps_epoch (R-IPI-11): same PID, epochs 0 → 1 → 2.
func TestTransactionalRejoinBumpsEpoch(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, ep := c.initTxn()
	if ep != 0 {
		t.Fatalf("first InitProducerId epoch %d, want 0", ep)
	}
	for want := int16(1); want <= 2; want++ {
		wantIPI(t, "rejoin", c.ipi(ipiReq(-1, -1)), 0, p, want)
	}
	s.wantEntry(p, 2, p, -1, txnstate.Empty)
}

// rejoin_appends_to_fence_log_for_broadcast (R-FEN-1, R-FEN-4): epoch 0
// does not broadcast; each bump overwrites the outbound entry.
func TestRejoinAppendsToFenceLogForBroadcast(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	if _, err := os.Stat(filepath.Join(s.fenceDir(), "from-0.json")); !os.IsNotExist(err) {
		t.Fatalf("epoch 0 wrote the fence file (stat: %v)", err)
	}
	if n := s.counterValue("kaas_fences_emitted_total"); n != 0 {
		t.Fatalf("%v fences emitted for epoch 0", n)
	}
	for want := 1; want <= 2; want++ {
		c.initTxn()
		if got := s.fenceFile(0); !reflect.DeepEqual(got, map[string]int{itoa(p): want}) {
			t.Fatalf("after bump %d the fence file is %v", want, got)
		}
	}
	if n := s.counterValue("kaas_fences_emitted_total"); n != 2 {
		t.Fatalf("%v fences emitted, want 2", n)
	}
}

// stale_claim_is_producer_fenced (R-IPI-11): a zombie that re-calls
// InitProducerId after a newer instance took over is fenced, not handed a
// newer epoch that would fence the live session.
func TestStaleClaimIsProducerFenced(t *testing.T) {
	s := startScenario(t)
	zombie, live := s.conn(), s.conn()
	p, _ := zombie.initTxn()
	wantIPI(t, "the new instance", live.ipi(ipiReq(-1, -1)), 0, p, 1)
	wantIPI(t, "the zombie's claim (P,0)", zombie.ipi(ipiReq(p, 0)), errProducerFenced, -1, -1)
	s.wantEntry(p, 1, p, -1, txnstate.Empty)
	// The live session is untouched: its own claim still bumps.
	wantIPI(t, "the live claim (P,1)", live.ipi(ipiReq(p, 1)), 0, p, 2)
}

// current_claim_bumps_and_its_retry_is_stable (R-IPI-11)
func TestCurrentClaimBumpsAndItsRetryIsStable(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	wantIPI(t, "claim (P,0)", c.ipi(ipiReq(p, 0)), 0, p, 1)
	s.wantEntry(p, 1, p, 0, txnstate.Empty)
	for i := 0; i < 3; i++ {
		wantIPI(t, "retried claim (P,0)", c.ipi(ipiReq(p, 0)), 0, p, 1)
	}
	s.wantEntry(p, 1, p, 0, txnstate.Empty)
}

// half_set_claim_is_invalid_request (R-IPI-2), on both paths and with or
// without an entry.
func TestHalfSetClaimIsInvalidRequest(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	for _, withEntry := range []bool{false, true} {
		if withEntry {
			c.initTxn()
		}
		for _, claim := range [][2]int64{{-1, 0}, {0, -1}, {12, -1}, {-1, 3}} {
			for _, idempotent := range []bool{false, true} {
				r := ipiReq(claim[0], int16(claim[1]))
				if idempotent {
					r.TransactionalID = nil
				}
				wantIPI(t, "half-set claim", c.ipi(r), errInvalidRequest, -1, -1)
			}
		}
		if e, ok := s.entry(scnTxnID); ok != withEntry || (ok && e.Epoch != 0) {
			t.Fatalf("entry %+v (exists %v) after half-set claims", e, ok)
		}
	}
}

// idempotent_path_ignores_a_claim (R-IPI-3)
func TestIdempotentPathIgnoresAClaim(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	before, _ := s.entry(scnTxnID)
	r := ipiReq(p, 0)
	r.TransactionalID = nil
	resp := c.ipi(r)
	if resp.ErrorCode != 0 || resp.ProducerID == p || resp.ProducerEpoch != 0 {
		t.Fatalf("idempotent IPI claiming (P,0): %s (%d,%d), want a fresh PID at epoch 0", codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	after, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the idempotent path touched t's entry: %+v → %+v", before, after)
	}
}

// rejoin_mid_ongoing_aborts_it_and_answers_concurrent (R-IPI-10, R-FEN-1..3,
// R-MRK-1): fence broadcast, ABORT marker on the log, CompleteAbort, clean
// retry.
func TestRejoinMidOngoingAbortsItAndAnswersConcurrent(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := s11Given(t, c)
	wantIPI(t, "rejoin while Ongoing", c.ipi(ipiReq(-1, -1)), errConcurrent, -1, -1)

	// Broadcast: the fence epoch is in the fence file and already rejects
	// the zombie on a partition it never wrote to.
	if got := s.fenceFile(0); !reflect.DeepEqual(got, map[string]int{itoa(p): 1}) {
		t.Fatalf("fence file %v, want P→1", got)
	}
	c.produceCode(pr{tp: a2, pid: p, ep: 0, seq: 0}, errInvalidEpoch)

	wantAbortMarkerAt(t, s, c, a0, 3, p, 1)
	s.waitState(txnstate.CompleteAbort)
	e := s.wantEntry(p, 1, p, -1, txnstate.CompleteAbort)
	if len(e.Partitions) != 0 {
		t.Fatalf("CompleteAbort still lists partitions %v", e.Partitions)
	}
	wantIPI(t, "retry", c.ipi(ipiReq(-1, -1)), 0, p, 2)
	s.wantEntry(p, 2, p, -1, txnstate.Empty)
	// The fence epoch 1 was never handed out, and a fresh transaction at
	// epoch 2 works.
	c.aptOK(p, 2, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 2, seq: 0, txn: true}, 4)
	wantCode(t, "END{P,2,commit}", c.end(p, 2, true), 0)
}
