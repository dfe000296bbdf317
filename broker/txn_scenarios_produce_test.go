package broker

// Scenarios S-19 … S-29 (spec scenarios.md, "Produce"): idempotent and
// transactional batch validation, Produce v9 with acks -1.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// logEnd is the high watermark of x (ListOffsets latest, read_uncommitted).
func logEnd(t *testing.T, c *scenarioConn, x tp) int64 {
	t.Helper()
	r := c.listOffset(x, -1, 0)
	if r.ErrorCode != 0 {
		t.Fatalf("ListOffsets %v: %s", x, codeName(r.ErrorCode))
	}
	return r.Offset
}

// s19 is S-19: an idempotent P writes seq 0–2 and 3–4 to a-0 and retries
// the first batch. It returns P.
func s19(t *testing.T, c *scenarioConn) int64 {
	t.Helper()
	p := c.initIdempotent()
	ts := time.Now().UnixMilli() - 1000
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, n: 3, ts: ts}, 0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 3, n: 2}, 3)
	dup := c.produce(pr{tp: a0, pid: p, ep: 0, seq: 0, n: 3, ts: ts})
	if dup.ErrorCode != 0 || dup.BaseOffset != 0 {
		t.Fatalf("duplicate PR{a-0,P,0,0,3}: %s at %d, want NONE at 0", codeName(dup.ErrorCode), dup.BaseOffset)
	}
	// R-PV-7 [quirk]: the duplicate answer carries the original batch's
	// timestamp as LogAppendTime, even on a CreateTime topic.
	if dup.LogAppendTime != ts || dup.LogStartOffset != 0 {
		t.Fatalf("duplicate answer LogAppendTime %d LogStartOffset %d, want %d and 0", dup.LogAppendTime, dup.LogStartOffset, ts)
	}
	if end := logEnd(t, c, a0); end != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", end)
	}
	return p
}

// S-19 (R-PV-7, R-PV-9, R-PV-11)
func TestS19_IdempotentAppendAndDuplicate(t *testing.T) {
	s := startScenario(t)
	s19(t, s.conn())
}

// S-20 (R-PV-9c)
func TestS20_SequenceGapIsOutOfOrder(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := s19(t, c)
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 6}, errOutOfOrder)
	if end := logEnd(t, c, a0); end != 5 {
		t.Fatalf("log end %d after a rejected batch, want 5", end)
	}
}

// S-21 (R-PV-9c): a retry that left the 5-batch window, and one that
// overlaps a window element without matching it, are out of order.
func TestS21_RetryOutsideWindowOrOverlappingIsOutOfOrder(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := c.initIdempotent()
	for seq := int32(0); seq < 6; seq++ {
		c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: seq}, int64(seq))
	}
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 0}, errOutOfOrder)
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 4, n: 2}, errOutOfOrder)
	if end := logEnd(t, c, a0); end != 6 {
		t.Fatalf("log end %d, want 6", end)
	}
}

// S-22 (R-PV-9a): an unknown PID may start at any sequence.
func TestS22_UnknownPIDStartsAnywhere(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	c.produceOK(pr{tp: a1, pid: 4242, ep: 0, seq: 42}, 0)
	c.produceOK(pr{tp: a1, pid: 4242, ep: 0, seq: 43}, 1)
}

// S-23 (R-PV-8, R-PV-9b)
func TestS23_EpochChecks(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := c.initIdempotent()
	c.produceOK(pr{tp: a0, pid: p, ep: 1, seq: 0, n: 5}, 0)
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 5}, errInvalidEpoch)
	c.produceCode(pr{tp: a0, pid: p, ep: 2, seq: 5}, errOutOfOrder)
	c.produceOK(pr{tp: a0, pid: p, ep: 2, seq: 0}, 5)
}

// S-24 (R-PV-2, R-PV-9): sequences wrap after int32 max.
func TestS24_SequenceWrapsAtInt32Max(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	const q = int64(5)<<40 + 99
	c.produceOK(pr{tp: a2, pid: q, ep: 0, seq: 2147483646, n: 3}, 0) // sequences …46, …47, 0
	c.produceOK(pr{tp: a2, pid: q, ep: 0, seq: 1, n: 3}, 3)
	c.produceCode(pr{tp: a2, pid: q, ep: 0, seq: 3, n: 3}, errOutOfOrder)
}

// S-25 (R-PV-15): after a clean restart and after a crash, a retry of the
// last acknowledged batch is still a duplicate and the next sequence
// continues.
func TestS25_ProducerStateSurvivesRestart(t *testing.T) {
	check := func(t *testing.T, c *scenarioConn, p int64) {
		t.Helper()
		c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 3, n: 2}, 3) // duplicate of the last batch
		c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 5}, 5)
	}
	t.Run("clean restart", func(t *testing.T) {
		s := startScenario(t)
		p := s19(t, s.conn())
		s.restart()
		check(t, s.conn(), p)
	})
	t.Run("killed broker", func(t *testing.T) {
		s := startScenario(t)
		p := s19(t, s.conn())
		crashed := startScenarioIn(t, s.crashImage())
		s.stop()
		check(t, crashed.conn(), p)
	})
}

// S-26 (R-PV-4): batches a client may not send.
func TestS26_InvalidClientBatchesAreInvalidRecord(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	two := append(buildBatch(batchSpec{pid: -1, epoch: -1, seq: -1, n: 1}), buildBatch(batchSpec{pid: -1, epoch: -1, seq: -1, n: 1})...)
	for _, tc := range []struct {
		name    string
		records []byte
	}{
		{"control attribute 0x20", buildBatch(batchSpec{pid: -1, epoch: -1, seq: -1, n: 1, attrs: 0x20})},
		{"pid 7 with base sequence -1", buildBatch(batchSpec{pid: 7, epoch: 0, seq: -1, n: 1})},
		{"two batches in one partition", two},
	} {
		r := onlyPartition(t, c.do(produceReq(nil, map[tp][]byte{a0: tc.records})).(*kmsg.ProduceResponse))
		wantCode(t, tc.name, r.ErrorCode, errInvalidRecord)
	}
	if end := logEnd(t, c, a0); end != 0 {
		t.Fatalf("log end %d after rejected batches, want 0", end)
	}
}

// S-27 (R-PV-3): a transactional batch without a TransactionalId fails
// the whole request.
func TestS27_TransactionalBatchWithoutTransactionalIDFailsEveryPartition(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	c.aptOK(p, 0, a0)
	req := produceReq(nil, map[tp][]byte{
		a0: buildBatch(batchSpec{pid: p, epoch: 0, seq: 0, n: 1, txn: true}),
		a1: buildBatch(batchSpec{pid: -1, epoch: -1, seq: -1, n: 1}),
	})
	got := produceCodes(c.do(req).(*kmsg.ProduceResponse))
	wantCodes(t, "PR{a-0,P,0,0,1,txn} with TransactionalId null", got, map[tp]int16{a0: errTxnIDAuthz, a1: errTxnIDAuthz})
	for _, x := range []tp{a0, a1} {
		if end := logEnd(t, c, x); end != 0 {
			t.Fatalf("%v log end %d, want 0", x, end)
		}
	}
}

// S-28 (R-PV-6): partition verification: a transactional batch for a
// partition never added to the transaction is INVALID_TXN_STATE.
func TestS28_TransactionalBatchNeedsItsPartitionAdded(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	batch := pr{tp: a0, pid: p, ep: 0, seq: 0, txn: true}
	c.produceCode(batch, errInvalidTxnState)
	c.aptOK(p, 0, a0)
	c.produceOK(batch, 0)
}

// S-29 (R-PV-10): a non-transactional batch of a PID with a transaction
// open on the partition is INVALID_TXN_STATE.
func TestS29_NonTransactionalBatchInsideOpenTransaction(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	c.aptOK(p, 0, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, txn: true}, 0)
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 1}, errInvalidTxnState)
}

// S-48 (R-PV-7a): a transactional batch is never a duplicate of an ended
// transaction's batch. Issue 21's lost records: an aborted transaction
// held seq 1; the client, told its batch failed, sent the next
// transaction's first batch with the same epoch and sequence, and was
// answered with the aborted batch's offset — a committed transaction
// missing a record.
func TestS48_AnEndedTransactionsBatchIsNoDuplicate(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	c.aptOK(p, 0, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, txn: true}, 0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 1, txn: true}, 1)
	wantCode(t, "END{P,0,abort}", c.end(p, 0, false), 0)
	eventually(t, "the abort marker at a-0's end", func() bool { return logEnd(t, c, a0) == 3 })
	c.aptOK(p, 0, a0)
	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 1, txn: true}, errOutOfOrder)
	if end := logEnd(t, c, a0); end != 3 {
		t.Fatalf("log end %d after the refused batch, want 3", end)
	}
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 2, txn: true}, 3)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 2, txn: true}, 3) // its retry: a duplicate
}
