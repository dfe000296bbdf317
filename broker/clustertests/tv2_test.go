package clustertests

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/storage/partlog/batchtest"
)

// Transaction version 2 across brokers (R-TV2-2, R-TV2-5), coordinator
// and partitions on different brokers: a franz-go producer commits
// transaction N through partitions another broker leads; a late batch of
// N — on N's partition (fenced by the marker at the bumped epoch) and on
// another (fenced by the coordinator when the leader asks to add it) — and
// a delayed EndTxn of N during N+1 are all refused; nothing of them is in
// the log.
func TestClusterTV2LateWorkFenced(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts, id = "late", 12, "late-txn"
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	coordinator := c.coordinatorOf(id)
	var other int32 = -1
	var onOther []int32
	for p := int32(0); p < parts; p++ {
		if l := leaders[p][0]; l != coordinator && (other == -1 || l == other) {
			other = l
			onOther = append(onOther, p)
		}
	}
	if len(onOther) < 3 {
		t.Fatalf("want 3 partitions led by one broker other than the coordinator %d: %v", coordinator, leaders)
	}
	ctx := brokertest.Context(t, 90*time.Second)
	prod := c.client(kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := func(p int32, v string) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %s: %v", v, err)
		}
	}
	txn(onOther[0], "n")
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := epoch - 1 // N's epoch: the commit bumped it
	if old < 0 {
		t.Fatalf("epoch %d after a TV2 commit: not bumped", epoch)
	}

	raw := brokertest.Dial(t, c.brokers[other].addr)
	defer raw.Close()
	late := func(p int32, seq int32) int16 {
		b := batchtest.Build(batchtest.Opts{ProducerID: pid, ProducerEpoch: old, BaseSequence: seq, Attributes: 0x10, Timestamp: time.Now().UnixMilli()}, "late")
		req := brokertest.ProduceRequest(topic, p, -1, b)
		req.SetVersion(12)
		req.TransactionID = kmsg.StringPtr(id)
		return raw.RoundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := late(onOther[0], 1); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("a late batch of N on its partition (broker %d): %v, want INVALID_PRODUCER_EPOCH", other, kerr.ErrorForCode(code))
	}
	if code := late(onOther[1], 0); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("a late batch of N on another partition (broker %d): %v, want INVALID_PRODUCER_EPOCH", other, kerr.ErrorForCode(code))
	}

	// N+1 open; a delayed EndTxn of N reaches the coordinator.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Partition: onOther[2], Value: []byte("n+1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(5)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, old, true
	if r := brokertest.Dial(t, c.brokers[coordinator].addr).RoundTrip(end).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.ProducerFenced.Code {
		t.Errorf("a delayed EndTxn of N during N+1: %v, want PRODUCER_FENCED", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit N+1: %v", err)
	}
	// The commit of N+1 is answered before its marker (R-TV2-7): wait
	// for it; anything past 2 is a late batch appended.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends := c.endOffsets(topic)
		if ends[onOther[0]] == 2 && ends[onOther[1]] == 0 && ends[onOther[2]] == 2 {
			break
		}
		if ends[onOther[0]] > 2 || ends[onOther[1]] > 0 || ends[onOther[2]] > 2 || time.Now().After(deadline) {
			t.Fatalf("log ends %v: want 2 (N and its marker) on %d, 0 on %d, 2 on %d", ends, onOther[0], onOther[1], onOther[2])
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := c.readAll(topic, 2)
	var vals []string
	for v, n := range got {
		vals = append(vals, fmt.Sprintf("%s×%d", v, n))
	}
	sort.Strings(vals)
	if fmt.Sprint(vals) != "[n+1×1 n×1]" {
		t.Fatalf("read_committed: %v, want n and n+1 once each", vals)
	}
}
