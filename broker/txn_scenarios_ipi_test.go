package broker

// Scenarios S-01 … S-18 (spec scenarios.md, "InitProducerId"): every
// request at the exact version named, through the wire.

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/slots"
	"kaas/model/txnstate"
)

// S-01 (R-IPI-6, R-IPI-11)
func TestS01_FirstInitProducerIDAllocatesAtEpochZero(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	resp := c.ipi(ipiReq(-1, -1))
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("IPI{}: %s (%d,%d), want NONE (P≥0,0)", codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	p := resp.ProducerID
	s.wantEntry(p, 0, p, -1, txnstate.Empty)
}

// S-02 (R-IPI-11)
func TestS02_EveryLaterCallBumpsTheEpoch(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	wantIPI(t, "second IPI{}", c.ipi(ipiReq(-1, -1)), 0, p, 1)
	wantIPI(t, "third IPI{}", c.ipi(ipiReq(-1, -1)), 0, p, 2)
	s.wantEntry(p, 2, p, -1, txnstate.Empty)
}

// s03 builds S-03's given state ⟨P,1,P,-1,Empty⟩ and runs its When: the
// claim (P,1) twice. It returns P.
func s03(t *testing.T, s *scenarioBroker, c *scenarioConn) int64 {
	t.Helper()
	p, _ := c.initTxn()
	wantIPI(t, "IPI{} (epoch 1)", c.ipi(ipiReq(-1, -1)), 0, p, 1)
	s.wantEntry(p, 1, p, -1, txnstate.Empty)
	wantIPI(t, "IPI{pid:P,ep:1}", c.ipi(ipiReq(p, 1)), 0, p, 2)
	wantIPI(t, "IPI{pid:P,ep:1} again (retry)", c.ipi(ipiReq(p, 1)), 0, p, 2)
	s.wantEntry(p, 2, p, 1, txnstate.Empty)
	return p
}

// S-03 (R-IPI-11)
func TestS03_ClaimedBumpAndItsRetryGetTheSameEpoch(t *testing.T) {
	s := startScenario(t)
	s03(t, s, s.conn())
}

// S-04 (R-IPI-11, R-GEN-2)
func TestS04_StaleClaimIsFencedVersionMapped(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := s03(t, s, c)
	before, _ := s.entry(scnTxnID)
	size := s.slotLogSize()

	v4 := ipiReq(p, 0)
	wantIPI(t, "v4 IPI{pid:P,ep:0}", c.ipi(v4), errProducerFenced, -1, -1)
	v3 := ipiReq(p, 0)
	v3.Version = 3
	wantIPI(t, "v3 IPI{pid:P,ep:0}", c.ipi(v3), errInvalidEpoch, -1, -1)

	after, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(before, after) || s.slotLogSize() != size {
		t.Fatalf("a fenced claim changed the entry: %+v → %+v", before, after)
	}
}

// S-05 (R-IPI-8)
func TestS05_ClaimOfAnotherPIDIsFenced(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := s03(t, s, c)
	wantIPI(t, "IPI{pid:P+1,ep:2}", c.ipi(ipiReq(p+1, 2)), errProducerFenced, -1, -1)
	s.wantEntry(p, 2, p, 1, txnstate.Empty)
}

// S-06 (R-IPI-2): a half-set claim is INVALID_REQUEST on both paths, at
// every version that carries a claim.
func TestS06_HalfSetClaimIsInvalidRequest(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	before, _ := s.entry(scnTxnID)
	for _, v := range []int16{3, 4} {
		for _, tc := range []struct {
			name  string
			id    *string
			pid   int64
			epoch int16
		}{
			{"IPI{pid:P,ep:-1}", kmsg.StringPtr(scnTxnID), p, -1},
			{"IPI{pid:-1,ep:0}", kmsg.StringPtr(scnTxnID), -1, 0},
			{"IPI{id:null,pid:5,ep:-1}", nil, 5, -1},
		} {
			r := ipiReq(tc.pid, tc.epoch)
			r.Version, r.TransactionalID = v, tc.id
			wantIPI(t, fmt.Sprintf("%s v%d", tc.name, v), c.ipi(r), errInvalidRequest, -1, -1)
		}
	}
	after, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("entry changed: %+v → %+v", before, after)
	}
}

// S-07 (R-IPI-3): the idempotent path ignores a well-formed claim and the
// timeout, and creates no coordinator entry.
func TestS07_IdempotentPathIgnoresClaimAndTimeout(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	issued := map[int64]bool{p: true}
	for i := 0; i < 2; i++ {
		issued[c.initIdempotent()] = true
	}
	r := ipiReq(p, 3)
	r.TransactionalID, r.TransactionTimeoutMillis = nil, -5
	resp := c.ipi(r)
	if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 || issued[resp.ProducerID] {
		t.Fatalf("IPI{id:null,to:-5,pid:P,ep:3}: %s (%d,%d); want NONE with a never-issued PID at epoch 0 (issued %v)",
			codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch, issued)
	}
	if all := s.b.txnStore().All(); len(all) != 1 || all[0].TransactionalID != scnTxnID {
		t.Fatalf("coordinator entries %+v; the idempotent path must create none", all)
	}
}

// S-08 (R-IPI-1)
func TestS08_EmptyTransactionalIDIsInvalidRequest(t *testing.T) {
	s := startScenario(t)
	r := ipiReq(-1, -1)
	r.TransactionalID = kmsg.StringPtr("")
	wantIPI(t, `IPI{id:""}`, s.conn().ipi(r), errInvalidRequest, -1, -1)
	if all := s.b.txnStore().All(); len(all) != 0 {
		t.Fatalf("entries %+v after a rejected request", all)
	}
}

// S-09 (R-IPI-1): the timeout is checked before slot ownership.
func TestS09_TransactionTimeoutBoundsPrecedeOwnership(t *testing.T) {
	withTimeout := func(ms int32) *kmsg.InitProducerIDRequest {
		r := ipiReq(-1, -1)
		r.TransactionTimeoutMillis = ms
		return r
	}
	t.Run("owner", func(t *testing.T) {
		s := startScenario(t)
		c := s.conn()
		for _, tc := range []struct {
			ms   int32
			code int16
		}{{0, errInvalidTimeout}, {-1, errInvalidTimeout}, {900001, errInvalidTimeout}} {
			wantIPI(t, "IPI{to:"+itoa(int64(tc.ms))+"}", c.ipi(withTimeout(tc.ms)), tc.code, -1, -1)
		}
		resp := c.ipi(withTimeout(900000))
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 {
			t.Fatalf("IPI{to:900000}: %s (%d,%d)", codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
		}
	})
	t.Run("slot owned by a peer", func(t *testing.T) {
		s := startScenario(t, foreignSlots(slots.Of(scnTxnID)))
		wantIPI(t, "IPI{to:0}", s.conn().ipi(withTimeout(0)), errInvalidTimeout, -1, -1)
	})
}

// S-10 (R-CRD-3)
func TestS10_NonOwnerAnswersNotCoordinator(t *testing.T) {
	s := startScenario(t, foreignSlots(slots.Of(scnTxnID)))
	c := s.conn()
	wantIPI(t, "IPI{}", c.ipi(ipiReq(-1, -1)), errNotCoordinator, -1, -1)
	// The other coordinator APIs route the same way (R-CRD-3).
	wantCodes(t, "APT", c.apt(aptReq(1, 0, a0)), map[tp]int16{a0: errNotCoordinator})
	wantCode(t, "END", c.end(1, 0, true), errNotCoordinator)
	if _, ok := s.entry(scnTxnID); ok {
		t.Fatal("a non-owner created an entry")
	}
	// The idempotent path needs no coordinator.
	c.initIdempotent()
}

// s11Given is S-11's given state: (P,0), APT a-0 and three transactional
// records at offsets 0–2.
func s11Given(t *testing.T, c *scenarioConn) int64 {
	t.Helper()
	p, ep := c.initTxn()
	if ep != 0 {
		t.Fatalf("first IPI epoch %d", ep)
	}
	c.aptOK(p, 0, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, n: 3, txn: true}, 0)
	return p
}

// wantAbortMarkerAt polls a-0 until the ABORT marker for (p, epoch) is
// at offset and checks its bytes.
func wantAbortMarkerAt(t *testing.T, s *scenarioBroker, c *scenarioConn, x tp, offset, p int64, epoch int16) {
	t.Helper()
	var batches []fetchedBatch
	eventually(t, "an ABORT marker lands on "+x.String(), func() bool {
		batches = batchesOf(t, c.fetch(x, offset, 0).RecordBatches)
		return len(batches) > 0
	})
	wantMarker(t, batches[0], offset, p, epoch, false, s.b.txnStore().CoordinatorEpoch(scnTxnID))
}

// S-11 (R-IPI-10, R-MRK-1, R-FEN-1)
func TestS11_RejoinMidOngoingAbortsAndFences(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := s11Given(t, c)

	wantIPI(t, "IPI{} while Ongoing", c.ipi(ipiReq(-1, -1)), errConcurrent, -1, -1)
	wantAbortMarkerAt(t, s, c, a0, 3, p, 1)
	s.waitState(txnstate.CompleteAbort)
	s.wantEntry(p, 1, p, -1, txnstate.CompleteAbort)

	wantIPI(t, "retry IPI{}", c.ipi(ipiReq(-1, -1)), 0, p, 2)
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 3, txn: true}, errInvalidEpoch)

	// read_committed sees none of the aborted records.
	f := c.fetch(a0, 0, 1)
	if f.LastStableOffset != 4 || len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].ProducerID != p || f.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("read_committed after the rejoin abort: LSO %d, aborted %+v", f.LastStableOffset, f.AbortedTransactions)
	}
}

// S-12 (R-IPI-10): a claim with the current epoch aborts too, and is
// stale once the abort has bumped the epoch.
func TestS12_ClaimedRejoinMidOngoingAbortsThenIsFenced(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := s11Given(t, c)

	wantIPI(t, "IPI{pid:P,ep:0} while Ongoing", c.ipi(ipiReq(p, 0)), errConcurrent, -1, -1)
	wantAbortMarkerAt(t, s, c, a0, 3, p, 1)
	s.waitState(txnstate.CompleteAbort)
	s.wantEntry(p, 1, p, -1, txnstate.CompleteAbort)
	wantIPI(t, "IPI{pid:P,ep:0} again", c.ipi(ipiReq(p, 0)), errProducerFenced, -1, -1)
	s.wantEntry(p, 1, p, -1, txnstate.CompleteAbort)
}

// prepareCommitHeld brings t to PrepareCommit with its marker held at
// gate: (P,0), APT a-0, one transactional record, END commit sent on its
// own connection (its answer waits for the marker). It returns P and the
// pending EndTxn answer.
func prepareCommitHeld(t *testing.T, s *scenarioBroker, gate *markerGate) (int64, <-chan kmsg.Response) {
	t.Helper()
	c := s.conn()
	p, _ := c.initTxn()
	c.aptOK(p, 0, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, txn: true}, 0)
	gate.close()
	t.Cleanup(gate.open) // runs before the broker stops, so Close never waits on a held marker
	answer := s.conn().async(endReq(p, 0, true))
	s.waitState(txnstate.PrepareCommit)
	eventually(t, "the COMMIT marker is held", func() bool { return gate.heldCount() == 1 })
	return p, answer
}

// releaseAndWantCommit opens the gate and waits for the held EndTxn to
// answer NONE and the entry to be CompleteCommit.
func releaseAndWantCommit(t *testing.T, s *scenarioBroker, gate *markerGate, answer <-chan kmsg.Response) {
	t.Helper()
	gate.open()
	resp := <-answer
	if resp == nil {
		t.Fatal("the held EndTxn got no answer")
	}
	wantCode(t, "held END{commit}", resp.(*kmsg.EndTxnResponse).ErrorCode, 0)
	s.waitState(txnstate.CompleteCommit)
}

// S-13 (R-IPI-9, R-TXN-2): CONCURRENT_TRANSACTIONS once the rejoin has
// waited --txn-marker-wait for the markers (200 ms here).
func TestS13_RejoinWhilePrepareCommitIsConcurrent(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks(), func(c *Config) { c.TxnMarkerWait = 200 * time.Millisecond })
	p, answer := prepareCommitHeld(t, s, gate)
	before, _ := s.entry(scnTxnID)
	size := s.slotLogSize()

	c := s.conn()
	wantIPI(t, "IPI{} while PrepareCommit", c.ipi(ipiReq(-1, -1)), errConcurrent, -1, -1)
	wantIPI(t, "IPI{pid:P,ep:0} while PrepareCommit", c.ipi(ipiReq(p, 0)), errConcurrent, -1, -1)
	after, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(before, after) || s.slotLogSize() != size {
		t.Fatalf("entry changed while PrepareCommit: %+v → %+v", before, after)
	}
	releaseAndWantCommit(t, s, gate, answer)
	wantIPI(t, "IPI{} after the commit", c.ipi(ipiReq(-1, -1)), 0, p, 1)
}

// seededPID is a producer id from another broker's range (broker 4), so
// it cannot collide with what this broker allocates.
const seededPID = int64(5)<<40 + 7

func seededEntry(epoch, lastEpoch int16, state txnstate.State) txnstate.Entry {
	return txnstate.Entry{TransactionalID: scnTxnID, ProducerID: seededPID, Epoch: epoch, LastProducerID: seededPID,
		LastEpoch: lastEpoch, TimeoutMs: scnTimeout, State: state, TxnStartMs: -1}
}

// S-14 (R-IPI-12): the last epoch handed out is 32766, then the id
// rotates to a fresh PID at epoch 0.
func TestS14_ExhaustedEpochRotatesToFreshPID(t *testing.T) {
	dir := t.TempDir()
	seedEntries(t, dir, seededEntry(32765, -1, txnstate.Empty))
	s := startScenarioIn(t, dir)
	c := s.conn()
	p := seededPID

	wantIPI(t, "IPI{} at 32765", c.ipi(ipiReq(-1, -1)), 0, p, 32766)
	resp := c.ipi(ipiReq(-1, -1))
	if resp.ErrorCode != 0 || resp.ProducerID == p || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("IPI{} at 32766: %s (%d,%d), want NONE (M≠P,0)", codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	m := resp.ProducerID
	s.wantEntry(m, 0, p, -1, txnstate.Empty)
	// The bump to 32766 was fenced; the rotation (epoch 0) fences nothing.
	if got := s.fenceFile(0); !reflect.DeepEqual(got, map[string]int{itoa(p): 32766}) {
		t.Fatalf("fence file %v, want only P→32766", got)
	}
}

// S-15 (R-IPI-12, R-IPI-8): a claimed rotation, its retry, and a second
// retry once the retry moved lastPid to the new PID.
func TestS15_ClaimedRotationRetryThenFenced(t *testing.T) {
	dir := t.TempDir()
	seedEntries(t, dir, seededEntry(32766, 32765, txnstate.CompleteAbort))
	s := startScenarioIn(t, dir)
	c := s.conn()
	p := seededPID

	resp := c.ipi(ipiReq(p, 32766))
	if resp.ErrorCode != 0 || resp.ProducerID == p || resp.ProducerEpoch != 0 {
		t.Fatalf("IPI{pid:P,ep:32766}: %s (%d,%d), want NONE (M,0)", codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	m := resp.ProducerID
	s.wantEntry(m, 0, p, 32766, txnstate.Empty)
	wantIPI(t, "retried rotation", c.ipi(ipiReq(p, 32766)), 0, m, 0)
	s.wantEntry(m, 0, m, 32766, txnstate.Empty)
	wantIPI(t, "second retry", c.ipi(ipiReq(p, 32766)), errProducerFenced, -1, -1)
	s.wantEntry(m, 0, m, 32766, txnstate.Empty)
}

// S-16 (R-IPI-12, U-3): exhausted epoch with a claim of another epoch is
// Apache's IllegalStateException, seen as UNKNOWN_SERVER_ERROR.
func TestS16_ExhaustedEpochWithStaleClaimIsUnknownServerError(t *testing.T) {
	dir := t.TempDir()
	seedEntries(t, dir, seededEntry(32766, 32765, txnstate.Empty))
	s := startScenarioIn(t, dir)
	before, _ := s.entry(scnTxnID)
	wantIPI(t, "IPI{pid:P,ep:32765}", s.conn().ipi(ipiReq(seededPID, 32765)), errUnknownServer, -1, -1)
	after, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("entry changed: %+v → %+v", before, after)
	}
}

// S-17 (R-IPI-6): with no entry any claim is accepted and a fresh PID is
// allocated (the claimed one is not reused).
func TestS17_NoEntryAcceptsAnyClaimWithFreshPID(t *testing.T) {
	s := startScenario(t)
	resp := s.conn().ipi(ipiReq(77, 5))
	if resp.ErrorCode != 0 || resp.ProducerID == 77 || resp.ProducerID>>40 != 1 || resp.ProducerEpoch != 0 {
		t.Fatalf("IPI{pid:77,ep:5}: %s (%d,%d), want NONE with a PID of broker 0's range at epoch 0",
			codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	m := resp.ProducerID
	s.wantEntry(m, 0, m, -1, txnstate.Empty)
}

// S-18 (R-IPI-4): PIDs are never reused across a restart.
func TestS18_ProducerIDsAreUniqueAcrossRestart(t *testing.T) {
	s := startScenario(t)
	seen := map[int64]bool{}
	for round := 0; round < 2; round++ {
		c := s.conn()
		for i := 0; i < 3; i++ {
			pid := c.initIdempotent()
			if seen[pid] {
				t.Fatalf("PID %d issued twice (round %d)", pid, round)
			}
			seen[pid] = true
		}
		if round == 0 {
			s.restart()
		}
	}
	if len(seen) != 6 {
		t.Fatalf("%d distinct PIDs, want 6", len(seen))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
