package broker

// Scenarios S-34 … S-47 (spec scenarios.md, "Transactions"), except S-43
// (TxnOffsetCommit needs the consumer-group work): the coordinator's
// APIs, markers, read_committed, the timeout reaper and recovery.

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
	"kaas/model/slots"
	"kaas/model/txnstate"
)

// S-34 (R-TXN-4, R-TXN-5)
func TestS34_AddPartitionsStartsTransactionOnceAndVerifyOnlyReports(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()

	before := time.Now().UnixMilli()
	wantCodes(t, "APT{P,0,[a-0,a-1]}", c.apt(aptReq(p, 0, a0, a1)), map[tp]int16{a0: 0, a1: 0})
	after := time.Now().UnixMilli()
	first := s.wantEntry(p, 0, p, -1, txnstate.Ongoing)
	if first.TxnStartMs < before || first.TxnStartMs > after {
		t.Fatalf("txnStartMs %d not set by the first add (sent within [%d,%d])", first.TxnStartMs, before, after)
	}
	if want := []model.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}}; !reflect.DeepEqual(first.Partitions, want) {
		t.Fatalf("partitions %v, want %v", first.Partitions, want)
	}

	size := s.slotLogSize()
	wantCodes(t, "APT{P,0,[a-0]}", c.apt(aptReq(p, 0, a0)), map[tp]int16{a0: 0})
	second, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(first, second) || s.slotLogSize() != size {
		t.Fatalf("adding a partition already in the transaction persisted a transition: %+v → %+v", first, second)
	}

	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	txn := kmsg.NewAddPartitionsToTxnRequestTransaction()
	txn.TransactionalID, txn.ProducerID, txn.ProducerEpoch, txn.VerifyOnly = scnTxnID, p, 0, true
	vt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	vt.Topic, vt.Partitions = "a", []int32{0, 2}
	txn.Topics = append(txn.Topics, vt)
	verify.Transactions = append(verify.Transactions, txn)
	resp := c.do(verify).(*kmsg.AddPartitionsToTxnResponse)
	got := map[tp]int16{}
	if resp.ErrorCode != 0 || len(resp.Transactions) != 1 || resp.Transactions[0].TransactionalID != scnTxnID {
		t.Fatalf("APT v4 VerifyOnly: top-level %s, %d transactions", codeName(resp.ErrorCode), len(resp.Transactions))
	}
	for _, rt := range resp.Transactions[0].Topics {
		for _, rp := range rt.Partitions {
			got[tp{rt.Topic, rp.Partition}] = rp.ErrorCode
		}
	}
	wantCodes(t, "APT v4 VerifyOnly [a-0,a-2]", got, map[tp]int16{a0: 0, a2: errInvalidTxnState})
	third, _ := s.entry(scnTxnID)
	if !reflect.DeepEqual(first, third) || s.slotLogSize() != size {
		t.Fatalf("VerifyOnly changed the entry: %+v → %+v", first, third)
	}
}

// S-35 (R-TXN-4 step 2): an unknown partition fails the request and adds
// nothing.
func TestS35_UnknownPartitionAddsNothing(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	zz := tp{"zz", 0}
	wantCodes(t, "APT{P,0,[a-0,zz-0]}", c.apt(aptReq(p, 0, a0, zz)), map[tp]int16{a0: errOperationNotTried, zz: errUnknownTopic})
	s.wantEntry(p, 0, p, -1, txnstate.Empty)
}

// S-36 (R-TXN-4 step 4, R-GEN-2)
func TestS36_AddPartitionsProducerChecks(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	for _, tc := range []struct {
		version int16
		code    int16
	}{{0, errInvalidEpoch}, {1, errInvalidEpoch}, {2, errProducerFenced}, {3, errProducerFenced}} {
		r := aptReq(p, 1, a0)
		r.Version = tc.version
		wantCodes(t, "APT{P,1,[a-0]} v"+itoa(int64(tc.version)), c.apt(r), map[tp]int16{a0: tc.code})
	}
	wantCodes(t, "APT{P+1,0,[a-0]}", c.apt(aptReq(p+1, 0, a0)), map[tp]int16{a0: errInvalidPIDMapping})
	unknown := aptReq(p, 0, a0)
	unknown.TransactionalID = "u"
	wantCodes(t, "APT for unknown id u", c.apt(unknown), map[tp]int16{a0: errInvalidPIDMapping})
	s.wantEntry(p, 0, p, -1, txnstate.Empty)
	if _, ok := s.entry("u"); ok {
		t.Fatal("APT created an entry for u")
	}
}

// openTxnOnA0 is the given state of S-37/S-39: (P,0), APT a-0, three
// transactional records at 0–2. It returns P.
func openTxnOnA0(t *testing.T, c *scenarioConn) int64 {
	t.Helper()
	p, _ := c.initTxn()
	c.aptOK(p, 0, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, n: 3, txn: true}, 0)
	return p
}

// wantTxnOutcomeOnA0 checks a-0 after END: the data batch at 0, the
// marker at 3, LSO 4, and read_committed's aborted list.
func wantTxnOutcomeOnA0(t *testing.T, s *scenarioBroker, c *scenarioConn, p int64, commit bool) {
	t.Helper()
	var f kmsg.FetchResponseTopicPartition
	eventually(t, "a-0 is stable up to the marker", func() bool {
		f = c.fetch(a0, 0, 1)
		return f.LastStableOffset == 4
	})
	batches := batchesOf(t, f.RecordBatches)
	if len(batches) != 2 || batches[0].FirstOffset != 0 || batches[0].NumRecords != 3 || batches[0].ProducerID != p || batches[0].Attributes&0x10 == 0 {
		t.Fatalf("read_committed fetch: %d batches %+v, want the transactional batch at 0 and the marker", len(batches), batches)
	}
	wantMarker(t, batches[1], 3, p, 0, commit, s.b.txnStore().CoordinatorEpoch(scnTxnID))
	if f.HighWatermark != 4 {
		t.Fatalf("high watermark %d, want 4", f.HighWatermark)
	}
	wantAborted := []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	if !commit {
		a := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		a.ProducerID, a.FirstOffset = p, 0
		wantAborted = append(wantAborted, a)
	}
	if f.AbortedTransactions == nil || !reflect.DeepEqual(f.AbortedTransactions, wantAborted) {
		t.Fatalf("read_committed AbortedTransactions %#v, want %#v (an array, never null)", f.AbortedTransactions, wantAborted)
	}
	u := c.fetch(a0, 0, 0)
	if u.AbortedTransactions != nil || u.LastStableOffset != 4 || len(batchesOf(t, u.RecordBatches)) != 2 {
		t.Fatalf("read_uncommitted: AbortedTransactions %#v (want null), LSO %d", u.AbortedTransactions, u.LastStableOffset)
	}
}

// S-37 (R-TXN-7, R-RC-1..4)
func TestS37_CommitWritesMarkerAndIsIdempotent(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := openTxnOnA0(t, c)
	wantCode(t, "END{P,0,commit}", c.end(p, 0, true), 0)
	wantTxnOutcomeOnA0(t, s, c, p, true)
	s.wantEntry(p, 0, p, -1, txnstate.CompleteCommit)
	wantCode(t, "END{P,0,commit} again", c.end(p, 0, true), 0)
	wantCode(t, "END{P,0,abort} after commit", c.end(p, 0, false), errInvalidTxnState)
	if end := logEnd(t, c, a0); end != 4 {
		t.Fatalf("log end %d: a retried EndTxn wrote another marker", end)
	}
}

// S-38 (R-TXN-7)
func TestS38_EndWithNothingAddedIsInvalidTxnState(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p, _ := c.initTxn()
	wantCode(t, "END{P,0,abort}", c.end(p, 0, false), errInvalidTxnState)
	wantCode(t, "END{P,0,commit}", c.end(p, 0, true), errInvalidTxnState)
	s.wantEntry(p, 0, p, -1, txnstate.Empty)
}

// S-39 (R-TXN-7, R-RC-3)
func TestS39_AbortListsTheTransactionForReadCommitted(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	p := openTxnOnA0(t, c)
	wantCode(t, "END{P,0,abort}", c.end(p, 0, false), 0)
	wantTxnOutcomeOnA0(t, s, c, p, false)
	s.wantEntry(p, 0, p, -1, txnstate.CompleteAbort)
	wantCode(t, "END{P,0,abort} again", c.end(p, 0, false), 0)
	wantCode(t, "END{P,0,commit} after abort", c.end(p, 0, true), errInvalidTxnState)
}

// s40 is S-40's given state on a-1: five plain records (0–4) at ts0, P's
// open transactional record at 5 (ts0), idempotent Q at 6–7 (ts0+1000).
func s40(t *testing.T, c *scenarioConn, ts0 int64) (p int64) {
	t.Helper()
	c.produceOK(pr{tp: a1, pid: -1, ep: -1, seq: -1, n: 5, ts: ts0}, 0)
	p, ep := c.initTxn()
	c.aptOK(p, ep, a1)
	c.produceOK(pr{tp: a1, pid: p, ep: ep, seq: 0, txn: true, ts: ts0}, 5)
	q := c.initIdempotent()
	c.produceOK(pr{tp: a1, pid: q, ep: 0, seq: 0, n: 2, ts: ts0 + 1000}, 6)
	return p
}

// wantS40 checks S-40's Then on a-1.
func wantS40(t *testing.T, c *scenarioConn, ts0 int64) {
	t.Helper()
	f := c.fetch(a1, 0, 1)
	batches := batchesOf(t, f.RecordBatches)
	if len(batches) != 1 || batches[0].FirstOffset != 0 || batches[0].NumRecords != 5 {
		t.Fatalf("read_committed fetch of a-1 returned %+v, want offsets 0–4 only", batches)
	}
	if f.LastStableOffset != 5 || f.HighWatermark != 8 || f.AbortedTransactions == nil || len(f.AbortedTransactions) != 0 {
		t.Fatalf("a-1: LSO %d HW %d aborted %#v, want 5, 8, []", f.LastStableOffset, f.HighWatermark, f.AbortedTransactions)
	}
	for _, tc := range []struct {
		name      string
		ts        int64
		isolation int8
		offset    int64
	}{
		{"LO{a-1,-1,read_committed}", -1, 1, 5},
		{"LO{a-1,-1,read_uncommitted}", -1, 0, 8},
		{"LO{a-1,ts,read_committed}", ts0 + 1, 1, -1}, // first match is offset 6, above the LSO
		{"LO{a-1,ts,read_uncommitted}", ts0 + 1, 0, 6},
		{"LO{a-1,-2,read_committed}", -2, 1, 0},
	} {
		r := c.listOffset(a1, tc.ts, tc.isolation)
		if r.ErrorCode != 0 || r.Offset != tc.offset {
			t.Fatalf("%s: %s offset %d, want NONE offset %d", tc.name, codeName(r.ErrorCode), r.Offset, tc.offset)
		}
		if tc.offset == -1 && r.Timestamp != -1 {
			t.Fatalf("%s: timestamp %d with offset -1, want -1", tc.name, r.Timestamp)
		}
	}
}

// S-40 (R-RC-1, R-RC-2, R-RC-5)
func TestS40_OpenTransactionHoldsTheLastStableOffset(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	ts0 := time.Now().UnixMilli() - 10000
	s40(t, c, ts0)
	wantS40(t, c, ts0)
}

// S-41 (R-TXN-9, R-FEN-1): the reaper aborts an overdue transaction at a
// bumped, fenced epoch.
func TestS41_TimeoutReaperAbortsAndFences(t *testing.T) {
	s := startScenario(t, func(c *Config) { c.TxnAbortInterval = 100 * time.Millisecond })
	c := s.conn()
	r := ipiReq(-1, -1)
	r.TransactionTimeoutMillis = 1000
	resp := c.ipi(r)
	if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("IPI{to:1000}: %s (%d,%d)", codeName(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
	}
	p := resp.ProducerID
	c.aptOK(p, 0, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 0, seq: 0, txn: true}, 0)

	s.waitState(txnstate.CompleteAbort)
	s.wantEntry(p, 1, p, -1, txnstate.CompleteAbort)
	batches := batchesOf(t, c.fetch(a0, 1, 0).RecordBatches)
	if len(batches) != 1 {
		t.Fatalf("%d batches after the data, want the ABORT marker", len(batches))
	}
	wantMarker(t, batches[0], 1, p, 1, false, s.b.txnStore().CoordinatorEpoch(scnTxnID))
	if got := s.fenceFile(0); !reflect.DeepEqual(got, map[string]int{itoa(p): 1}) {
		t.Fatalf("fence file %v, want P→1", got)
	}

	c.produceCode(pr{tp: a0, pid: p, ep: 0, seq: 1, txn: true}, errInvalidEpoch)
	c.produceCode(pr{tp: a2, pid: p, ep: 0, seq: 0}, errInvalidEpoch) // fenced where P never wrote
	wantCode(t, "END{P,0,commit}", c.end(p, 0, true), errProducerFenced)
	wantIPI(t, "IPI{pid:P,ep:0}", c.ipi(ipiReq(p, 0)), errProducerFenced, -1, -1)
	wantIPI(t, "IPI{}", c.ipi(ipiReq(-1, -1)), 0, p, 2)
}

// S-42 (R-TXN-2, R-TXN-4): while PrepareCommit's markers are out, adds
// and EndTxn in either direction are CONCURRENT_TRANSACTIONS once they
// have waited --txn-marker-wait for the markers (200 ms here).
func TestS42_PrepareCommitInFlightIsConcurrent(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks(), func(c *Config) { c.TxnMarkerWait = 200 * time.Millisecond })
	p, answer := prepareCommitHeld(t, s, gate)
	c := s.conn()
	wantCodes(t, "APT{P,0,[a-1]}", c.apt(aptReq(p, 0, a1)), map[tp]int16{a1: errConcurrent})
	wantCode(t, "END{P,0,abort}", c.end(p, 0, false), errConcurrent)
	wantCode(t, "END{P,0,commit}", c.end(p, 0, true), errConcurrent)
	s.wantEntry(p, 0, p, -1, txnstate.PrepareCommit)
	releaseAndWantCommit(t, s, gate, answer)
}

// writeTxnMarkersReq is WriteTxnMarkers v1 with one marker for a-0.
func writeTxnMarkersReq(pid int64, epoch int16, commit bool, coordinatorEpoch int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = "a", []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

func (c *scenarioConn) writeTxnMarkers(pid int64, epoch int16, commit bool, coordinatorEpoch int32) int16 {
	c.t.Helper()
	resp := c.do(writeTxnMarkersReq(pid, epoch, commit, coordinatorEpoch)).(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != pid || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		c.t.Fatalf("WriteTxnMarkers answer %+v, want one partition result for pid %d", resp, pid)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// S-44 (R-MRK-3, R-MRK-4). The spec's marker carries coordinator epoch
// 5; kaas refuses coordinator epochs beyond its slots' (issue 9 row 11),
// so the marker carries the broker's own (1 on a fresh data directory)
// and the fenced one is below it. Without an authorizer only brokers may
// send markers: this test stands in for one.
func TestS44_WriteTxnMarkersBytesAndChecks(t *testing.T) {
	s := startScenario(t, func(c *Config) { c.AllowClientTxnMarkers = true })
	ce := s.b.txnStore().MaxCoordinatorEpoch()
	c := s.conn()
	p, _ := c.initTxn()
	c.initTxn()
	if _, ep := c.initTxn(); ep != 2 {
		t.Fatalf("epoch %d, want 2", ep)
	}
	c.aptOK(p, 2, a0)
	c.produceOK(pr{tp: a0, pid: p, ep: 2, seq: 0, txn: true}, 0)

	wantCode(t, "WriteTxnMarkers{P,2,commit,[a-0],coordEpoch ce}", c.writeTxnMarkers(p, 2, true, ce), 0)
	f := c.fetch(a0, 1, 0)
	batches := batchesOf(t, f.RecordBatches)
	if len(batches) != 1 || f.HighWatermark != 2 {
		t.Fatalf("%d batches at the log end (HW %d), want the marker alone at 1", len(batches), f.HighWatermark)
	}
	wantMarker(t, batches[0], 1, p, 2, true, ce)
	if f.LastStableOffset != 2 {
		t.Fatalf("LSO %d after the COMMIT marker, want 2", f.LastStableOffset)
	}

	wantCode(t, "WriteTxnMarkers{P,1,…}", c.writeTxnMarkers(p, 1, true, ce), errInvalidEpoch)
	wantCode(t, "WriteTxnMarkers{P,2,…,coordEpoch ce-1}", c.writeTxnMarkers(p, 2, true, ce-1), errCoordinatorFenced)
	if end := logEnd(t, c, a0); end != 2 {
		t.Fatalf("log end %d: a rejected marker was appended", end)
	}
}

// S-45 (R-CRD-1, R-CRD-2)
func TestS45_FindTransactionCoordinator(t *testing.T) {
	s := startScenario(t)
	c := s.conn()
	host, port := s.b.advertised("")
	for key, slot := range map[string]int{"txn-a": 8, "my-txn": 45, "polygenelubricants": 0} {
		if got := slots.Of(key); got != slot {
			t.Fatalf("slot(%q) = %d, want %d", key, got, slot)
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorType = 3, key, 1
		resp := c.do(req).(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode != 0 || resp.NodeID != 0 || resp.Host != host || resp.Port != port {
			t.Fatalf("FindCoordinator v3 %q: %s node %d %s:%d, want broker 0 at %s:%d", key, codeName(resp.ErrorCode), resp.NodeID, resp.Host, resp.Port, host, port)
		}
	}

	v4 := kmsg.NewPtrFindCoordinatorRequest()
	v4.Version, v4.CoordinatorType, v4.CoordinatorKeys = 4, 1, []string{"txn-a", "my-txn"}
	resp := c.do(v4).(*kmsg.FindCoordinatorResponse)
	if len(resp.Coordinators) != 2 {
		t.Fatalf("FindCoordinator v4 with two keys: %d results", len(resp.Coordinators))
	}
	for i, key := range v4.CoordinatorKeys {
		co := resp.Coordinators[i]
		if co.Key != key || co.ErrorCode != 0 || co.NodeID != 0 || co.Host != host || co.Port != port {
			t.Fatalf("FindCoordinator v4 result %d: %+v, want key %q on broker 0", i, co, key)
		}
	}

	bad := kmsg.NewPtrFindCoordinatorRequest()
	bad.Version, bad.CoordinatorKey, bad.CoordinatorType = 3, "t", 7
	if r := c.do(bad).(*kmsg.FindCoordinatorResponse); r.ErrorCode != errInvalidRequest || r.NodeID != -1 {
		t.Fatalf("FindCoordinator KeyType 7: %s node %d, want INVALID_REQUEST node -1", codeName(r.ErrorCode), r.NodeID)
	}
}

// readCommittedView is everything S-46 compares across a restart.
type readCommittedView struct {
	fetches map[string]kmsg.FetchResponseTopicPartition
	offsets map[string]kmsg.ListOffsetsResponseTopicPartition
}

func viewOf(t *testing.T, c *scenarioConn, ts0 int64) readCommittedView {
	t.Helper()
	v := readCommittedView{fetches: map[string]kmsg.FetchResponseTopicPartition{}, offsets: map[string]kmsg.ListOffsetsResponseTopicPartition{}}
	for _, x := range []tp{a0, a1} {
		for _, iso := range []int8{0, 1} {
			key := x.String() + "/iso" + itoa(int64(iso))
			f := c.fetch(x, 0, iso)
			f.UnknownTags = kmsg.Tags{}
			v.fetches[key] = f
			for _, ts := range []int64{-1, -2, ts0 + 1} {
				lo := c.listOffset(x, ts, iso)
				lo.UnknownTags = kmsg.Tags{}
				v.offsets[key+"/ts"+itoa(ts)] = lo
			}
		}
	}
	return v
}

// S-46 (R-RC-7): aborted lists, LSO and ListOffsets answers are the same
// after a clean restart and after a crash.
func TestS46_ReadCommittedStateSurvivesRestart(t *testing.T) {
	given := func(t *testing.T) (*scenarioBroker, int64, readCommittedView) {
		s := startScenario(t)
		c := s.conn()
		p := openTxnOnA0(t, c) // S-39 on a-0
		wantCode(t, "END{P,0,abort}", c.end(p, 0, false), 0)
		wantTxnOutcomeOnA0(t, s, c, p, false)
		ts0 := time.Now().UnixMilli() - 10000
		s40(t, c, ts0) // S-40 on a-1 (P's next transaction, left open)
		wantS40(t, c, ts0)
		return s, ts0, viewOf(t, c, ts0)
	}
	compare := func(t *testing.T, before, after readCommittedView) {
		t.Helper()
		for k, b := range before.fetches {
			if a := after.fetches[k]; !reflect.DeepEqual(a, b) {
				t.Fatalf("fetch %s changed across the restart:\nbefore %+v\nafter  %+v", k, b, a)
			}
		}
		for k, b := range before.offsets {
			if a := after.offsets[k]; !reflect.DeepEqual(a, b) {
				t.Fatalf("ListOffsets %s changed across the restart:\nbefore %+v\nafter  %+v", k, b, a)
			}
		}
	}
	t.Run("clean restart", func(t *testing.T) {
		s, ts0, before := given(t)
		s.restart()
		compare(t, before, viewOf(t, s.conn(), ts0))
	})
	t.Run("killed broker", func(t *testing.T) {
		s, ts0, before := given(t)
		crashed := startScenarioIn(t, s.crashImage())
		s.stop()
		compare(t, before, viewOf(t, crashed.conn(), ts0))
	})
}

// S-47 (R-TXN-3, R-MRK-1): a PrepareCommit left by a killed broker is
// finished by the next start, unaided.
func TestS47_PrepareCommitLeftByACrashCompletesOnRestart(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks())
	p, answer := prepareCommitHeld(t, s, gate)
	image := s.crashImage() // PrepareCommit durable, marker never written
	gate.open()
	<-answer
	s.stop()

	restarted := startScenarioIn(t, image)
	e := restarted.waitState(txnstate.CompleteCommit)
	if e.ProducerID != p || e.Epoch != 0 || len(e.Partitions) != 0 {
		t.Fatalf("entry after recovery %+v", e)
	}
	c := restarted.conn()
	f := c.fetch(a0, 0, 1)
	batches := batchesOf(t, f.RecordBatches)
	if len(batches) != 2 || f.LastStableOffset != 2 || f.AbortedTransactions == nil || len(f.AbortedTransactions) != 0 {
		t.Fatalf("a-0 after recovery: %d batches, LSO %d, aborted %#v; want data + COMMIT marker, LSO 2, []",
			len(batches), f.LastStableOffset, f.AbortedTransactions)
	}
	wantMarker(t, batches[1], 1, p, 0, true, restarted.b.txnStore().CoordinatorEpoch(scnTxnID))
	wantIPI(t, "IPI{} after recovery", c.ipi(ipiReq(-1, -1)), 0, p, 1)
}

// S-49 (R-TXN-2, issue 23 item 3): while a transition's markers are out, the
// next AddPartitionsToTxn waits in the broker for them and then succeeds;
// without the wait it is answered CONCURRENT_TRANSACTIONS at once and the
// client pays its retry backoff.
func TestS49_AddPartitionsWaitsForTheMarkersInFlight(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks())
	p, answer := prepareCommitHeld(t, s, gate)
	add := s.conn().async(aptReq(p, 0, a1))
	// The add cannot be answered yet: the COMMIT marker is held, and the
	// entry stays PrepareCommit until it lands.
	s.wantEntry(p, 0, p, -1, txnstate.PrepareCommit)
	select {
	case resp := <-add:
		t.Fatalf("AddPartitionsToTxn answered while the marker is held: %v", resp)
	default:
	}
	gate.open()
	if resp := <-answer; resp == nil || resp.(*kmsg.EndTxnResponse).ErrorCode != 0 {
		t.Fatalf("EndTxn once its marker landed: %v, want NONE", resp)
	}
	resp := <-add
	if resp == nil {
		t.Fatal("the waiting AddPartitionsToTxn got no answer")
	}
	for _, rt := range resp.(*kmsg.AddPartitionsToTxnResponse).Topics {
		for _, rp := range rt.Partitions {
			wantCode(t, "APT{P,0,[a-1]} that waited for the marker", rp.ErrorCode, 0)
		}
	}
	s.wantEntry(p, 0, p, -1, txnstate.Ongoing)
}

// S-50 (R-TXN-2): the wait is bounded (--txn-marker-wait): a marker that does not
// come leaves the waiting request CONCURRENT_TRANSACTIONS.
func TestS50_WaitForMarkersIsBounded(t *testing.T) {
	gate := &markerGate{}
	s := startScenario(t, gate.hooks(), func(c *Config) { c.TxnMarkerWait = 200 * time.Millisecond })
	p, answer := prepareCommitHeld(t, s, gate)
	wantCodes(t, "APT{P,0,[a-1]} while the marker is held", s.conn().apt(aptReq(p, 0, a1)), map[tp]int16{a1: errConcurrent})
	releaseAndWantCommit(t, s, gate, answer)
}
