package partition

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog/batchtest"
)

// Issue 21: a batch appended while the partition's lease was alive, whose
// lease then went before the fsync answered, is on disk but may be cut by
// the owner that took the partition over. It is not made visible to
// readers (the chaos checker saw a read_uncommitted consumer read records
// the next owner's log never held), and its outcome is unknown: once the
// partition is abandoned the answer is REQUEST_TIMED_OUT (the client
// retries the same batch until an answer settles it), never
// NOT_LEADER_OR_FOLLOWER, which tells a client the batch was not written
// — so it may give the batch up and reuse its sequence in the next
// transaction.
func TestAppendWhoseLeaseWentIsAnsweredTimedOut(t *testing.T) {
	var calls atomic.Int32
	f := open(t, t.TempDir(), func(c *Config) {
		// Open for the append, closed from the fsync on.
		c.Gate = func() bool { return calls.Add(1) == 1 }
	})
	answer := f.produce(batchtest.Build(batchtest.Opts{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0, Timestamp: 1}, "v"), -1)
	waitSynced(t, f, 1)
	if hw := f.h.View().HighWatermark; hw != 0 {
		t.Fatalf("high watermark %d after an fsync under a closed gate: readers would see the batch", hw)
	}
	f.h.Abandon()
	if r := wait(t, answer); r.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("append whose lease went before its acknowledgement: %+v, want REQUEST_TIMED_OUT", r)
	}
	if r := wait(t, f.produce(batchtest.Build(batchtest.Opts{ProducerID: 7, ProducerEpoch: 0, BaseSequence: 1, Timestamp: 2}, "w"), -1)); r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("append after the lease went: %+v, want NOT_LEADER_OR_FOLLOWER (nothing written)", r)
	}
}

// A lease in doubt that is renewed after all (etcd was slow, not gone):
// the withheld fsync becomes visible and the append is acknowledged.
func TestWithheldFsyncIsVisibleOnceTheGateOpens(t *testing.T) {
	var calls atomic.Int32
	var renewed atomic.Bool
	f := open(t, t.TempDir(), func(c *Config) {
		c.Gate = func() bool { return calls.Add(1) == 1 || renewed.Load() }
	})
	answer := f.produce(batchtest.Plain(1, "v"), -1)
	waitSynced(t, f, 1)
	if hw := f.h.View().HighWatermark; hw != 0 {
		t.Fatalf("high watermark %d while the gate is closed", hw)
	}
	renewed.Store(true)
	if r := wait(t, answer); r.ErrorCode != 0 || r.BaseOffset != 0 {
		t.Fatalf("the append once the gate opened again: %+v", r)
	}
	if hw := f.h.View().HighWatermark; hw != 1 {
		t.Fatalf("high watermark %d once the gate opened again, want 1", hw)
	}
}

// waitSynced waits until the partition has finished n fsyncs and the
// message that ran them.
func waitSynced(t *testing.T, f *fixture, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.obs.syncs.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d fsyncs, want %d", f.obs.syncs.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	f.block()() // a round trip behind the flush
}

// Issue 21: a partition abandoned on a lease loss and claimed again at
// once (the broker rejoined with a new lease and rendezvous hashing gives
// it back) opens while the abandoned actor still answers late requests:
// the name is free at once. It used to fail with "name exists" for the
// retire grace, after the take-over had sealed the segment — and the
// ownership loop claimed it again, raising the leader epoch, tens of times
// a second.
func TestReopenWhileTheAbandonedActorLingers(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir)
	if r := wait(t, f.produce(batchtest.Plain(1, "a"), -1)); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	old := f.h
	old.Abandon()
	f.h = nil // the fixture no longer stops it: the grace timer does

	cfg := Config{Topic: "t", Partition: 0, Dir: dir, Log: testLogConfig(), MaxMessageBytes: 1 << 20, Logger: quiet(), TakeOver: true, LeaderEpoch: 1}
	h, err := Open(f.sys, cfg)
	if err != nil {
		t.Fatalf("reopening while the abandoned actor lingers: %v", err)
	}
	f.h = h
	if r := wait(t, f.produce(batchtest.Plain(1, "b"), -1)); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("produce to the new ownership: %+v", r)
	}
	late := make(chan messages.ProduceResult, 1)
	old.Produce(&messages.Produce{Batch: batchtest.Plain(1, "late"), Acks: -1, Reply: func(r messages.ProduceResult) { late <- r }})
	if r := wait(t, late); r.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("a late request to the abandoned actor: %+v, want NOT_LEADER_OR_FOLLOWER", r)
	}
	if info, ok := f.sys.Lookup("partition/t-0"); !ok || info.PID == nil || info.PID != h.pid.Load() {
		t.Fatalf("the name lists %+v, want the new ownership's actor", info)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
