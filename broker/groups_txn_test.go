package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"kaas/model/slots"
)

// rawGroupClient sends hand-built group and transaction requests.
type rawGroupClient struct {
	t    *testing.T
	addr string
	cl   *kgo.Client
	ctx  context.Context
}

func newRawGroupClient(t *testing.T, b *Broker) *rawGroupClient {
	t.Helper()
	// The classic transaction protocol (these tests end a transaction and
	// go on at the same epoch): EndTxn and TxnOffsetCommit below TV2's v5.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.MaxVersions(tv1Versions()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &rawGroupClient{t: t, addr: b.Addr(), cl: cl, ctx: ctx}
}

func (r *rawGroupClient) request(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	resp, err := r.cl.Request(r.ctx, req)
	if err != nil {
		r.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// joinAndSync makes a one-member group (JoinGroup v3, no member id
// round trip) and returns the member id and generation.
func (r *rawGroupClient) joinAndSync(group string, sessionMs int32) (string, int32) {
	r.t.Helper()
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(3)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = group, sessionMs, 5000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = []string{"a"}
	p.Metadata = md.AppendTo(nil)
	join.Protocols = append(join.Protocols, p)
	jr := r.pinned(join, 3).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 {
		r.t.Fatalf("join: %v", kerr.ErrorForCode(jr.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.Generation, sync.MemberID = group, jr.Generation, jr.MemberID
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = jr.MemberID, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	sync.GroupAssignment = append(sync.GroupAssignment, a)
	if sr := r.request(sync).(*kmsg.SyncGroupResponse); sr.ErrorCode != 0 {
		r.t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	return jr.MemberID, jr.Generation
}

// pinned sends req at exactly version v.
func (r *rawGroupClient) pinned(req kmsg.Request, v int16) kmsg.Response {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addr), kgo.MaxVersions(pinVersion(req.Key(), v)))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.Request(r.ctx, req)
	if err != nil {
		r.t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), v, err)
	}
	return resp
}

func (r *rawGroupClient) initProducer(txnID string) (int64, int16) {
	r.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
	resp := r.request(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 {
		r.t.Fatalf("init producer id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.ProducerID, resp.ProducerEpoch
}

func (r *rawGroupClient) addOffsets(txnID string, pid int64, epoch int16, group string) int16 {
	r.t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txnID, pid, epoch, group
	return r.request(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
}

func (r *rawGroupClient) endTxn(txnID string, pid int64, epoch int16, commit bool) int16 {
	r.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txnID, pid, epoch, commit
	return r.request(req).(*kmsg.EndTxnResponse).ErrorCode
}

// txnCommit sends TxnOffsetCommit v3 for a-0 and returns its code.
func (r *rawGroupClient) txnCommit(txnID string, pid int64, epoch int16, group, member string, generation int32, offset int64) int16 {
	r.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group, pid, epoch
	req.Generation, req.MemberID = generation, member
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "a"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := r.pinned(req, 3).(*kmsg.TxnOffsetCommitResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchA0 is OffsetFetch (v8+ form) of a-0 for group: offset and code.
func (r *rawGroupClient) fetchA0(group string, requireStable bool) (int64, int16) {
	r.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = requireStable
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = "a", []int32{0}
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	resp := r.pinned(req, 8).(*kmsg.OffsetFetchResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
		r.t.Fatalf("offset fetch: %+v", resp)
	}
	p := resp.Groups[0].Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

func pinVersion(key, v int16) *kversion.Versions {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return vs
}

// TestTxnOffsetCommitStagingAndRequireStable is scenario S-43 through the
// wire: R-TXN-11 (no AddOffsetsToTxn → INVALID_TXN_STATE), R-TXN-12 group
// checks, R-TXN-13 staging, R-RC-6 require_stable, and the transaction
// coordinator's COMMIT and ABORT reaching the staged offsets.
func TestTxnOffsetCommitStagingAndRequireStable(t *testing.T) {
	if slots.Of("g") != 3 {
		t.Fatalf("spec vector: group g is slot 3, got %d", slots.Of("g"))
	}
	b := startGroupBroker(t, t.TempDir(), nil)
	createGroupTopic(t, newAdmin(t, b.Addr()), "a", 1)
	r := newRawGroupClient(t, b)
	m1, gen := r.joinAndSync("g", 30000)
	pid, epoch := r.initProducer("t")

	if code := r.txnCommit("t", pid, epoch, "g", m1, gen, 10); code != kerr.InvalidTxnState.Code {
		t.Fatalf("before AddOffsetsToTxn: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if code := r.addOffsets("t", pid, epoch, "g"); code != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	for _, tc := range []struct {
		name   string
		member string
		gen    int32
		code   int16
	}{
		{"older generation", m1, gen - 1, kerr.IllegalGeneration.Code},
		{"unknown member", "zz", gen, kerr.UnknownMemberID.Code},
		{"member of the generation", m1, gen, 0},
	} {
		if code := r.txnCommit("t", pid, epoch, "g", tc.member, tc.gen, 10); code != tc.code {
			t.Fatalf("%s: %v, want %v", tc.name, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.code))
		}
	}
	if off, code := r.fetchA0("g", true); off != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable while staged: %d %v", off, kerr.ErrorForCode(code))
	}
	if off, code := r.fetchA0("g", false); off != -1 || code != 0 {
		t.Fatalf("staged offset visible: %d %v", off, kerr.ErrorForCode(code))
	}
	if code := r.endTxn("t", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn commit: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, 5*time.Second, "committed offset visible", func() (bool, string) {
		off, code := r.fetchA0("g", true)
		return off == 10 && code == 0, ""
	})

	// An aborted transaction's offsets never show.
	if code := r.addOffsets("t", pid, epoch, "g"); code != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	if code := r.txnCommit("t", pid, epoch, "g", m1, gen, 20); code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}
	if code := r.endTxn("t", pid, epoch, false); code != 0 {
		t.Fatalf("EndTxn abort: %v", kerr.ErrorForCode(code))
	}
	waitUntil(t, 5*time.Second, "aborted offset dropped", func() (bool, string) {
		off, code := r.fetchA0("g", true)
		return off == 10 && code == 0, ""
	})
}

// TestCompleteTxnOffsetsAfterRestart calls the transaction seam directly:
// staged offsets survive a broker restart (still UNSTABLE), a COMMIT
// marker then materialises them, an ABORT drops them, and a marker from
// an older epoch than the slot has recorded is refused.
func TestCompleteTxnOffsetsAfterRestart(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir, nil)
	createGroupTopic(t, newAdmin(t, b.Addr()), "a", 1)
	r := newRawGroupClient(t, b)
	pid, epoch := r.initProducer("t2")
	if code := r.addOffsets("t2", pid, epoch, "g2"); code != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	if code := r.txnCommit("t2", pid, epoch, "g2", "", -1, 30); code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}
	closeBroker(t, b)

	b = startGroupBroker(t, dir, nil)
	r = newRawGroupClient(t, b)
	if off, code := r.fetchA0("g2", true); off != -1 || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("staged offset after restart: %d %v", off, kerr.ErrorForCode(code))
	}
	complete := func(e int16, commit bool) int16 {
		done := make(chan int16, 1)
		b.completeTxnOffsets(pid, e, commit, []string{"g2"}, nil, func(code int16) { done <- code })
		select {
		case code := <-done:
			return code
		case <-time.After(5 * time.Second):
			t.Fatal("completeTxnOffsets never called done")
			return 0
		}
	}
	if code := complete(epoch, true); code != 0 {
		t.Fatalf("commit marker: %v", kerr.ErrorForCode(code))
	}
	if off, code := r.fetchA0("g2", true); off != 30 || code != 0 {
		t.Fatalf("after commit marker: %d %v", off, kerr.ErrorForCode(code))
	}
	if code := complete(epoch-1, false); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker from an older epoch: %v", kerr.ErrorForCode(code))
	}

	// Stage again and abort: the committed offset stays.
	if code := r.endTxn("t2", pid, epoch, true); code != 0 {
		t.Fatalf("EndTxn: %v", kerr.ErrorForCode(code))
	}
	if code := r.addOffsets("t2", pid, epoch, "g2"); code != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
	}
	if code := r.txnCommit("t2", pid, epoch, "g2", "", -1, 40); code != 0 {
		t.Fatalf("txn commit: %v", kerr.ErrorForCode(code))
	}
	if code := complete(epoch, false); code != 0 {
		t.Fatalf("abort marker: %v", kerr.ErrorForCode(code))
	}
	if off, code := r.fetchA0("g2", true); off != 30 || code != 0 {
		t.Fatalf("after abort marker: %d %v", off, kerr.ErrorForCode(code))
	}
}
