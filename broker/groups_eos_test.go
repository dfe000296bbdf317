package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ctpWorker is one consume-transform-produce loop on a franz-go
// GroupTransactSession: every record read from "in" is written to "out"
// and the read offsets are committed inside the same transaction
// (TxnOffsetCommit, KIP-447).
type ctpWorker struct {
	sess      *kgo.GroupTransactSession
	cancel    context.CancelFunc
	done      chan error
	committed atomic.Int64 // transactions that committed records
	err       error
	stopOnce  sync.Once
}

func startCTPWorker(t *testing.T, addr, txnID string) *ctpWorker {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(addr),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup("ctp"),
		kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.SessionTimeout(6*time.Second),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxPartitionBytes(1), // one batch per partition per fetch: many transactions
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &ctpWorker{sess: sess, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- w.run(ctx) }()
	t.Cleanup(func() {
		w.stopOnce.Do(w.stop)
		if w.err != nil {
			t.Errorf("worker %s: %v", txnID, w.err)
		}
	})
	return w
}

// run loops until ctx is cancelled. Cancellation only interrupts the
// poll: a transaction in progress is finished, so a stopped worker leaves
// no open transaction behind (one would hold its partitions'
// require_stable fetches until the transaction timeout).
func (w *ctpWorker) run(ctx context.Context) error {
	work := context.Background()
	for {
		fetches := w.sess.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		if err := w.sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var produceErr error
		var mu sync.Mutex
		fetches.EachRecord(func(r *kgo.Record) {
			w.sess.Produce(work, &kgo.Record{Topic: "out", Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					produceErr = err
					mu.Unlock()
				}
			})
		})
		commit := kgo.TryCommit
		mu.Lock()
		if produceErr != nil {
			commit = kgo.TryAbort
		}
		mu.Unlock()
		// Pace the loop so the group changes membership mid-stream.
		time.Sleep(5 * time.Millisecond)
		ok, err := w.sess.End(work, commit)
		if ok && len(fetches.Records()) > 0 {
			w.committed.Add(1)
		}
		if err != nil {
			// The session aborts and rewinds on retriable errors; only
			// fatal ones end the worker.
			return fmt.Errorf("end: %w", err)
		}
	}
}

// stop ends the loop at a transaction boundary and closes the session
// (leaving the group).
func (w *ctpWorker) stop() {
	w.cancel()
	if err := <-w.done; err != nil {
		w.err = err
	}
	w.sess.Close()
	close(w.done)
}

// TestGroupTransactSessionExactlyOnce is the consume-transform-produce
// round trip: 600 input records pass through GroupTransactSession workers
// while the group rebalances (a second worker joins, then the first
// leaves), and read_committed sees every input exactly once in the output.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "in", 3)
	createGroupTopic(t, adm, "out", 3)
	const perPartition = 200
	for p := int32(0); p < 3; p++ {
		produceOneByOne(t, addr, "in", p, perPartition)
	}
	// Progress is what the group committed for "in", inside the
	// transactions.
	committedIn := func() (int64, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, "ctp")
		if err != nil {
			return 0, err.Error()
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum, fmt.Sprint(sum)
	}
	// The workers' pace follows the machine's load (with -race, 100
	// records took 2 s at load 20 and 7-10 s at load 30, where a 20 s
	// bound on the next 200 failed runs that were still moving): each
	// stage waits for its count as long as the count keeps rising, and
	// fails when it stalls longer than a rebalance may take.
	const stall = 20 * time.Second

	w1 := startCTPWorker(t, addr, "ctp-1")
	waitRising(t, stall, "the first worker made progress", 100, committedIn)
	w2 := startCTPWorker(t, addr, "ctp-2")
	waitRising(t, stall, "both workers made progress", 300, committedIn)
	w1.stopOnce.Do(w1.stop)
	waitRising(t, stall, "every input record committed", 3*perPartition, committedIn)

	if w1.committed.Load() == 0 || w2.committed.Load() == 0 {
		t.Fatalf("committed transactions: first worker %d, second %d; the group never shared the work", w1.committed.Load(), w2.committed.Load())
	}
	t.Logf("transactions: first worker %d, second %d", w1.committed.Load(), w2.committed.Load())
	seen := map[string]int{}
	for _, v := range consumeAll(t, b, "out", kgo.ReadCommitted()) {
		seen[v]++
	}
	for p := 0; p < 3; p++ {
		for i := 0; i < perPartition; i++ {
			v := fmt.Sprintf("in-%d-%d", p, i)
			if seen[v] != 1 {
				t.Fatalf("%s is in the output %d times", v, seen[v])
			}
		}
	}
	if len(seen) != 3*perPartition {
		t.Fatalf("output has %d distinct values, want %d", len(seen), 3*perPartition)
	}
}

// waitRising waits until count reaches target, failing once it has not
// risen for stall (count's string is the state a failure reports).
func waitRising(t *testing.T, stall time.Duration, what string, target int64, count func() (int64, string)) {
	t.Helper()
	best, since := int64(-1), time.Now()
	for {
		n, state := count()
		if n >= target {
			return
		}
		if n > best {
			best, since = n, time.Now()
		}
		if time.Since(since) > stall {
			t.Fatalf("%s: stuck at %s (want %d) for %v", what, state, target, stall)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// produceOneByOne writes n records to topic/partition, each in its own
// batch.
func produceOneByOne(t *testing.T, addr, topic string, partition int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("%s-%d-%d", topic, partition, i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("producing: %v", err)
		}
	}
}
