package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/partition"
	"kaas/actors/txn"
	"kaas/model"
	"kaas/model/txnstate"
	"kaas/storage/partlog"
)

// Raw-protocol tests of transaction version 2 (docs/spec
// transaction-version.md): Produce v12's implicit add, EndTxn v5's bump,
// retry, rotation and fencing, AddPartitionsToTxn v5.

// produce12Req is p as Produce v12 (a TV2 client's).
func produce12Req(p pr) *kmsg.ProduceRequest {
	req := produceReq(kmsg.StringPtr(scnTxnID), map[tp][]byte{p.tp: buildBatch(p.batch())})
	req.Version = 12
	return req
}

// produce12 sends p as Produce v12.
func (c *scenarioConn) produce12(p pr) kmsg.ProduceResponseTopicPartition {
	c.t.Helper()
	return onlyPartition(c.t, c.do(produce12Req(p)).(*kmsg.ProduceResponse))
}

// within waits for a held request's answer, failing after scnWait.
func within(t *testing.T, what string, answer <-chan kmsg.Response) kmsg.Response {
	t.Helper()
	select {
	case resp := <-answer:
		if resp == nil {
			t.Fatalf("%s: no answer (connection failed)", what)
		}
		return resp
	case <-time.After(scnWait):
		t.Fatalf("%s: not answered within %v", what, scnWait)
	}
	return nil
}

func (c *scenarioConn) produce12OK(p pr) int64 {
	c.t.Helper()
	r := c.produce12(p)
	if r.ErrorCode != 0 {
		c.t.Fatalf("Produce v12 %+v: %s", p, codeName(r.ErrorCode))
	}
	return r.BaseOffset
}

// end5 sends EndTxn v5.
func (c *scenarioConn) end5(pid int64, ep int16, commit bool) *kmsg.EndTxnResponse {
	c.t.Helper()
	req := endReq(pid, ep, commit)
	req.Version = 5
	return c.do(req).(*kmsg.EndTxnResponse)
}

func wantEnd5(t *testing.T, what string, r *kmsg.EndTxnResponse, code int16, pid int64, epoch int16) {
	t.Helper()
	if r.ErrorCode != code || r.ProducerID != pid || r.ProducerEpoch != epoch {
		t.Fatalf("%s: EndTxn v5 %s (%d,%d), want %s (%d,%d)", what, codeName(r.ErrorCode), r.ProducerID, r.ProducerEpoch,
			codeName(code), pid, epoch)
	}
}

// markerEpochs are the (producer id, epoch) of the control batches of x.
func markerEpochs(t *testing.T, c *scenarioConn, x tp) [][2]int64 {
	t.Helper()
	var out [][2]int64
	raw := c.fetch(x, 0, 0).RecordBatches
	for len(raw) > 0 {
		h, err := partlog.ParseBatchHeader(raw)
		if err != nil || h.Size() > int64(len(raw)) {
			t.Fatalf("fetched bytes of %v do not parse: %v", x, err)
		}
		if h.IsControl() {
			out = append(out, [2]int64{h.ProducerID, int64(h.ProducerEpoch)})
		}
		raw = raw[h.Size():]
	}
	return out
}

// TestTV2EndTxnBumpsAndFencesTheFinishedTransaction (R-TV2-2, R-TV2-4,
// R-TV2-5): Produce v12 adds its partition itself; EndTxn v5 answers the
// bumped epoch, its markers carry it; a lost answer's retry gets the same
// answer; during the next transaction a delayed EndTxn and a late batch
// of the finished one are fenced, on the partitions of the finished
// transaction and on the others.
func TestTV2EndTxnBumpsAndFencesTheFinishedTransaction(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, e := c.initTxn()
	c.produce12OK(pr{tp: a0, pid: p, ep: e, seq: 0, txn: true})
	if got := s.wantEntry(p, e, p, -1, txnstate.Ongoing); got.TV != 2 || !got.HasPartition(model.TopicPartition{Topic: scnTopic, Partition: 0}) {
		t.Fatalf("after Produce v12: entry %+v, want a-0 in a TV2 transaction", got)
	}
	wantEnd5(t, "commit", c.end5(p, e, true), 0, p, e+1)
	s.wantEntry(p, e+1, p, e, txnstate.CompleteCommit)
	wantEnd5(t, "the commit's retry", c.end5(p, e, true), 0, p, e+1)
	wantEnd5(t, "the commit's retry as an abort", c.end5(p, e, false), kerr.InvalidTxnState.Code, -1, -1)
	if got := markerEpochs(t, c, a0); len(got) != 1 || got[0] != [2]int64{p, int64(e + 1)} {
		t.Fatalf("markers on a-0: %v, want one at (%d,%d)", got, p, e+1)
	}

	// Transaction N+1, on a-1 only.
	c.produce12OK(pr{tp: a1, pid: p, ep: e + 1, seq: 0, txn: true})
	wantEnd5(t, "a delayed EndTxn of the finished transaction", c.end5(p, e, true), kerr.ProducerFenced.Code, -1, -1)
	wantEnd5(t, "a delayed abort of the finished transaction", c.end5(p, e, false), kerr.ProducerFenced.Code, -1, -1)
	if r := c.produce12(pr{tp: a0, pid: p, ep: e, seq: 1, txn: true}); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a late batch of the finished transaction on its partition: %s, want INVALID_PRODUCER_EPOCH", codeName(r.ErrorCode))
	}
	if r := c.produce12(pr{tp: a2, pid: p, ep: e, seq: 0, txn: true}); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a late batch of the finished transaction on another partition: %s, want INVALID_PRODUCER_EPOCH", codeName(r.ErrorCode))
	}
	if r := c.produce(pr{tp: a2, pid: p, ep: e, seq: 0, txn: true}); r.ErrorCode == 0 {
		t.Fatal("a late batch of the finished transaction as Produce v9: appended")
	}
	wantEnd5(t, "commit N+1", c.end5(p, e+1, true), 0, p, e+2)
	s.wantEntry(p, e+2, p, e+1, txnstate.CompleteCommit)
	if lo := c.listOffset(a2, -1, 1); lo.Offset != 0 {
		t.Fatalf("a-2 holds %d offsets: a fenced batch was appended", lo.Offset)
	}
	// An abort with nothing added bumps too (R-TV2-2).
	wantEnd5(t, "an abort with nothing in the transaction", c.end5(p, e+2, false), 0, p, e+3)
	wantEnd5(t, "a commit with nothing in the transaction", c.end5(p, e+3, true), kerr.InvalidTxnState.Code, -1, -1)
}

// TestTV2RotationThroughCommits (R-TV2-3): commits alone exhaust the
// epoch and rotate the producer id; the markers of the last transaction
// of the old id carry 32767; a lost rotation answer's retry gets the new
// id; the old id is fenced; the new one goes on. The entry starts at epoch
// 32765 (seeded) rather than after 32 765 real commits.
func TestTV2RotationThroughCommits(t *testing.T) {
	dir := t.TempDir()
	const old = int64(777)
	seedEntries(t, dir, txnstate.Entry{TransactionalID: scnTxnID, ProducerID: old, Epoch: 32765, LastProducerID: old, LastEpoch: 32764,
		TimeoutMs: 60000, State: txnstate.CompleteCommit, TxnStartMs: -1, LastUpdateMs: time.Now().UnixMilli(), TV: 2})
	s := startScenarioIn(t, dir)
	c := s.conn()
	c.produce12OK(pr{tp: a0, pid: old, ep: 32765, seq: 0, txn: true})
	wantEnd5(t, "commit at 32765", c.end5(old, 32765, true), 0, old, 32766)
	c.produce12OK(pr{tp: a0, pid: old, ep: 32766, seq: 0, txn: true})
	r := c.end5(old, 32766, true)
	if r.ErrorCode != 0 || r.ProducerID == old || r.ProducerID < 0 || r.ProducerEpoch != 0 {
		t.Fatalf("commit at 32766: %s (%d,%d), want a fresh producer id at 0", codeName(r.ErrorCode), r.ProducerID, r.ProducerEpoch)
	}
	fresh := r.ProducerID
	s.wantEntry(fresh, 0, old, 32766, txnstate.CompleteCommit)
	wantEnd5(t, "the rotation's retry", c.end5(old, 32766, true), 0, fresh, 0)
	if got := markerEpochs(t, c, a0); len(got) != 2 || got[1] != [2]int64{old, 32767} {
		t.Fatalf("markers on a-0: %v, want the last at (%d,32767)", got, old)
	}
	if r := c.produce12(pr{tp: a1, pid: old, ep: 32766, seq: 1, txn: true}); r.ErrorCode == 0 {
		t.Fatal("a batch of the old producer id after the rotation: appended")
	}
	c.produce12OK(pr{tp: a1, pid: fresh, ep: 0, seq: 0, txn: true})
	wantEnd5(t, "commit on the new id", c.end5(fresh, 0, true), 0, fresh, 1)
}

// TestAddPartitionsToTxnV5Adds (R-TV2-5): v5 with VerifyOnly false is a
// partition leader's implicit add: it starts a TV2 transaction, and a
// verification then finds the partition in it.
func TestAddPartitionsToTxnV5Adds(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, e := c.initTxn()
	for _, verifyOnly := range []bool{false, true} {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 5
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = scnTxnID, p, e, verifyOnly
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = scnTopic, []int32{1}
		tx.Topics = append(tx.Topics, rt)
		req.Transactions = append(req.Transactions, tx)
		resp := c.do(req).(*kmsg.AddPartitionsToTxnResponse)
		if resp.ErrorCode != 0 || len(resp.Transactions) != 1 || resp.Transactions[0].Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("AddPartitionsToTxn v5 verifyOnly=%v: %+v", verifyOnly, resp)
		}
	}
	if got := s.wantEntry(p, e, p, -1, txnstate.Ongoing); got.TV != 2 {
		t.Fatalf("entry %+v: not a TV2 transaction", got)
	}
}

// commitAnsweredEarly opens a TV2 transaction that writes one batch to
// a-0 at sequence 0, holds its marker back at gate and commits it: EndTxn
// v5 is answered (epoch bumped) while the marker is still held. It
// returns the connection, the producer id and the transaction's epoch.
func commitAnsweredEarly(t *testing.T, s *scenarioBroker, gate *markerGate) (*scenarioConn, int64, int16) {
	t.Helper()
	c := s.conn()
	p, e := c.initTxn()
	c.produce12OK(pr{tp: a0, pid: p, ep: e, seq: 0, txn: true})
	gate.close()
	t.Cleanup(gate.open) // before the broker stops
	end := endReq(p, e, true)
	end.Version = 5
	wantEnd5(t, "commit, its marker held", within(t, "EndTxn v5 with its marker held", s.conn().async(end)).(*kmsg.EndTxnResponse), 0, p, e+1)
	return c, p, e
}

// TestTV2EndTxnAnsweredBeforeItsMarkers (R-TV2-7): a TV2 EndTxn is
// answered once PrepareCommit is durable and every partition of the
// transaction refuses new data of the ended epoch, while its marker is
// still held back. In that window a late batch of the finished
// transaction is INVALID_PRODUCER_EPOCH on its partition and on another,
// a retry of a batch it wrote is still answered as that batch, and the
// next transaction's first batch, at the bumped epoch, waits and lands in
// the new transaction after the marker, not in the old one.
func TestTV2EndTxnAnsweredBeforeItsMarkers(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks())
	c, p, e := commitAnsweredEarly(t, s, gate)
	if n := gate.heldCount(); n != 1 {
		t.Fatalf("%d markers held when EndTxn was answered, want 1 (answered before it)", n)
	}
	s.wantEntry(p, e+1, p, e, txnstate.PrepareCommit)

	if r := c.produce12(pr{tp: a0, pid: p, ep: e, seq: 1, txn: true}); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a late batch of the answered transaction on its partition: %s, want INVALID_PRODUCER_EPOCH", codeName(r.ErrorCode))
	}
	if r := c.produce12(pr{tp: a2, pid: p, ep: e, seq: 0, txn: true}); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a late batch of the answered transaction on another partition: %s, want INVALID_PRODUCER_EPOCH", codeName(r.ErrorCode))
	}
	if r := c.produce12(pr{tp: a0, pid: p, ep: e, seq: 0, txn: true}); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("a retry of the batch the transaction wrote: %s at %d, want NONE at 0 (its duplicate)", codeName(r.ErrorCode), r.BaseOffset)
	}

	next := s.conn().async(produce12Req(pr{tp: a0, pid: p, ep: e + 1, seq: 0, txn: true}))
	eventually(t, "the next transaction's first batch waits for the marker on a-0", func() bool {
		info, ok := s.b.sys.Lookup("partition/" + scnTopic + "-0")
		sum, _ := info.State(info.PID).(partition.Summary)
		return ok && sum.AwaitingMarker == 1
	})
	gate.open()
	r := onlyPartition(t, within(t, "the next transaction's first batch", next).(*kmsg.ProduceResponse))
	if r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("the next transaction's first batch: %s at %d, want NONE at 2 (after the marker)", codeName(r.ErrorCode), r.BaseOffset)
	}
	if got := s.wantEntry(p, e+1, p, e, txnstate.Ongoing); !got.HasPartition(model.TopicPartition{Topic: scnTopic, Partition: 0}) {
		t.Fatalf("entry %+v: want a-0 in the new transaction", got)
	}
	wantEnd5(t, "abort the next transaction", c.end5(p, e+1, false), 0, p, e+2)
	awaitMarkers(t, s.b)
	if got := markerEpochs(t, c, a0); len(got) != 2 || got[0] != [2]int64{p, int64(e + 1)} || got[1] != [2]int64{p, int64(e + 2)} {
		t.Fatalf("markers on a-0: %v, want (%d,%d) then (%d,%d)", got, p, e+1, p, e+2)
	}
	// read_committed: the first transaction's batch only; the second's
	// was aborted with it.
	f := c.fetch(a0, 0, 1)
	if len(f.AbortedTransactions) != 1 || f.AbortedTransactions[0].FirstOffset != 2 {
		t.Fatalf("aborted transactions on a-0: %+v, want the one from offset 2", f.AbortedTransactions)
	}
	if lo := c.listOffset(a2, -1, 1); lo.Offset != 0 {
		t.Fatalf("a-2 holds %d offsets: a fenced batch was appended", lo.Offset)
	}
}

// TestTV2EndFenceRaisedAgainAfterACrash (R-TV2-7, R-TXN-3): a TV2 commit
// answered early, then the broker dies with the marker unwritten; the
// restarted broker resumes the marker and, before it lands, refuses the
// ended transaction's late data (the end floor was in memory only), while
// a retry of its written batch is still answered as that batch.
func TestTV2EndFenceRaisedAgainAfterACrash(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks())
	_, p, e := commitAnsweredEarly(t, s, gate)
	image := s.crashImage() // PrepareCommit durable, the marker never written
	gate.open()
	s.stop()

	held := &markerGate{closed: true}
	restarted := startScenarioIn(t, image, held.hooks())
	t.Cleanup(held.open) // before the broker stops
	eventually(t, "the resumed COMMIT marker is held", func() bool { return held.heldCount() == 1 })
	rc := restarted.conn()
	if r := rc.produce12(pr{tp: a0, pid: p, ep: e, seq: 1, txn: true}); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("a late batch of the answered transaction after the restart: %s, want INVALID_PRODUCER_EPOCH", codeName(r.ErrorCode))
	}
	if r := rc.produce12(pr{tp: a0, pid: p, ep: e, seq: 0, txn: true}); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("a retry of its written batch after the restart: %s at %d, want NONE at 0", codeName(r.ErrorCode), r.BaseOffset)
	}
	held.open()
	restarted.waitState(txnstate.CompleteCommit)
	f := rc.fetch(a0, 0, 1)
	if n := len(batchesOf(t, f.RecordBatches)); n != 2 || f.LastStableOffset != 2 {
		t.Fatalf("a-0 after the resumed marker: %d batches, LSO %d; want the batch and its COMMIT marker, LSO 2", n, f.LastStableOffset)
	}
}

// S-51 (R-TXN-2, R-TV2-5): the implicit add of a Produce v12 waits at the
// coordinator for the previous transaction's markers until the Produce's
// own timeout, not --txn-marker-wait: with the marker held, a Produce
// whose 300 ms timeout runs out is answered NOT_ENOUGH_REPLICAS (the
// coordinator's 51) long before the hour the coordinator's bound would
// allow, and one with time left is held and lands once the marker does.
func TestS51_ImplicitAddWaitsUntilTheProduceTimeout(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks(), func(c *Config) { c.TxnMarkerWait = time.Hour })
	c, p, e := commitAnsweredEarly(t, s, gate)

	short := produce12Req(pr{tp: a1, pid: p, ep: e + 1, seq: 0, txn: true})
	short.TimeoutMillis = 300
	r := onlyPartition(t, within(t, "a Produce whose timeout runs out while the marker is held", c.async(short)).(*kmsg.ProduceResponse))
	if r.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("Produce v12 with a 300 ms timeout, the marker held: %s, want NOT_ENOUGH_REPLICAS", codeName(r.ErrorCode))
	}
	if n := gate.heldCount(); n != 1 {
		t.Fatalf("%d markers held when the short Produce was answered, want 1", n)
	}

	long := s.conn().async(produce12Req(pr{tp: a1, pid: p, ep: e + 1, seq: 0, txn: true}))
	eventually(t, "the next Produce waits at the coordinator", func() bool { return heldAtCoordinator(s) == 1 })
	gate.open()
	r = onlyPartition(t, within(t, "the Produce that waited", long).(*kmsg.ProduceResponse))
	if r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("the Produce that waited for the marker: %s at %d, want NONE at 0", codeName(r.ErrorCode), r.BaseOffset)
	}
	if got := s.wantEntry(p, e+1, p, e, txnstate.Ongoing); !got.HasPartition(model.TopicPartition{Topic: scnTopic, Partition: 1}) {
		t.Fatalf("entry %+v: want a-1 in the new transaction", got)
	}
}

// heldAtCoordinator is how many requests t's actor holds back (-1: no
// actor).
func heldAtCoordinator(s *scenarioBroker) int {
	info, ok := s.b.sys.Lookup("txn/" + scnTxnID)
	if !ok {
		return -1
	}
	sum, _ := info.State(info.PID).(txn.Summary)
	return sum.Held
}

// batchedAdds is an AddPartitionsToTxn v5 (a partition leader's) adding
// one partition to each of two transactions in one request.
func batchedAdds(p int64, e int16, x tp, q int64, qe int16, y tp) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	for _, a := range []struct {
		id  string
		pid int64
		ep  int16
		at  tp
	}{{scnTxnID, p, e, x}, {"u", q, qe, y}} {
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch = a.id, a.pid, a.ep
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = a.at.topic, []int32{a.at.part}
		tx.Topics = append(tx.Topics, rt)
		req.Transactions = append(req.Transactions, tx)
	}
	return req
}

// batchedCodes is each transaction's partition code, by transactional id.
func batchedCodes(t *testing.T, resp kmsg.Response) map[string]int16 {
	t.Helper()
	r := resp.(*kmsg.AddPartitionsToTxnResponse)
	out := map[string]int16{}
	for _, tx := range r.Transactions {
		if r.ErrorCode != 0 || len(tx.Topics) != 1 || len(tx.Topics[0].Partitions) != 1 {
			t.Fatalf("AddPartitionsToTxn v5 answer %+v", r)
		}
		out[tx.TransactionalID] = tx.Topics[0].Partitions[0].ErrorCode
	}
	return out
}

// TestBatchedAddWaitsForMarkers (R-TXN-2): an add in a v4+ request that
// batches several transactions (a partition leader's) waits for its
// transaction's markers too, for a short while (the answer gathers every
// transaction of the request): past it CONCURRENT_TRANSACTIONS, the other
// transaction added; within it the add succeeds once the marker lands,
// instead of 51 at once (which costs the producer a retry and its backoff).
func TestBatchedAddWaitsForMarkers(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks())
	_, p, e := commitAnsweredEarly(t, s, gate)
	c := s.conn()
	ipiU := ipiReq(-1, -1)
	ipiU.TransactionalID = kmsg.StringPtr("u")
	u := c.ipi(ipiU)
	if u.ErrorCode != 0 {
		t.Fatalf("IPI{id:u}: %s", codeName(u.ErrorCode))
	}

	t.Cleanup(func() { batchedAddWait.Store(0) })
	batchedAddWait.Store(int64(200 * time.Millisecond))
	got := batchedCodes(t, within(t, "a batched add past its wait", c.async(batchedAdds(p, e+1, a1, u.ProducerID, u.ProducerEpoch, a1))))
	if got[scnTxnID] != errConcurrent || got["u"] != 0 {
		t.Fatalf("batched adds with t's marker held past the wait: %v, want t 51, u 0", got)
	}

	batchedAddWait.Store(int64(time.Hour))
	held := c.async(batchedAdds(p, e+1, a1, u.ProducerID, u.ProducerEpoch, a2))
	eventually(t, "t's add waits at the coordinator", func() bool { return heldAtCoordinator(s) == 1 })
	gate.open()
	if got := batchedCodes(t, within(t, "a batched add that waited", held)); got[scnTxnID] != 0 || got["u"] != 0 {
		t.Fatalf("batched adds once t's marker landed: %v, want both NONE", got)
	}
	s.wantEntry(p, e+1, p, e, txnstate.Ongoing)
}
