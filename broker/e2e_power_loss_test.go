package broker_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/model/txnstate"
	"kaas/storage/durable"
	"kaas/storage/txnlog"
	"kaas/storage/vfs/memfs"
)

// TestPowerLossKeepsWhatWasAcknowledged runs a broker on the in-memory
// filesystem, produces and commits offsets while it simulates a power
// loss at a random moment (keeping a random part of what was not
// fsynced), then starts a new broker on what the disk would hold: every
// acknowledged record and commit is there, the topic created before is
// there with all its partitions (their directory entries were fsynced:
// issue 9 row 14), and the new broker takes writes.
func TestPowerLossKeepsWhatWasAcknowledged(t *testing.T) {
	for round := 0; round < memfs.Iterations(2); round++ {
		t.Run(fmt.Sprint(round), powerLossRound)
	}
}

// memfsBroker is an empty in-memory filesystem and a way to start brokers
// on it, or on its crash images, with the same data directory.
func memfsBroker(t *testing.T) (*memfs.FS, func(*memfs.FS) *broker.Broker) {
	_, m, start := memfsBrokerIn(t)
	return m, start
}

// memfsBrokerIn is memfsBroker with the data directory, for a test that
// writes stores in it before the first broker starts.
func memfsBrokerIn(t *testing.T) (string, *memfs.FS, func(*memfs.FS) *broker.Broker) {
	dir := t.TempDir()
	m := memfs.New()
	if err := durable.MkdirAll(m, dir); err != nil {
		t.Fatal(err)
	}
	return dir, m, func(fs *memfs.FS) *broker.Broker {
		b, err := broker.Start(brokertest.Config(t, dir, brokertest.WithConfig(func(c *broker.Config) { c.FS = fs })))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func powerLossRound(t *testing.T) {
	m, start := memfsBroker(t)
	b := start(m)
	brokertest.CreateTopic(t, b.Addr(), "power", 3, nil)
	cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("power"))
	adm := brokertest.Admin(t, b.Addr())

	var mu sync.Mutex
	acked := map[string]bool{}
	committed := int64(-1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("r%06d", i)
			cl.Produce(ctx, kgo.StringRecord(v), func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[v] = true
					mu.Unlock()
				}
			})
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for off := int64(1); ctx.Err() == nil; off++ {
			var os kadm.Offsets
			os.AddOffset("power", 0, off, -1)
			if err := adm.CommitAllOffsets(ctx, "g", os); err == nil {
				mu.Lock()
				committed = off
				mu.Unlock()
			}
		}
	}()
	brokertest.Eventually(t, 30*time.Second, "acknowledged records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 500 && committed > 5
	})
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	mu.Lock()
	crashed := m.Crash(memfs.CrashOptions{Rand: rand.New(rand.NewPCG(rand.Uint64(), 1))})
	wantRecords := make([]string, 0, len(acked))
	for v := range acked {
		wantRecords = append(wantRecords, v)
	}
	wantCommitted := committed
	mu.Unlock()
	cancel()
	wg.Wait()
	cl.Close()
	b.Close(context.Background()) // the lost machine; nothing reaches the crash image

	b = start(crashed)
	t.Cleanup(func() { brokertest.Stop(t, b) })
	got := map[string]bool{}
	cons := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("power"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	end := brokertest.Admin(t, b.Addr())
	ends, err := end.ListEndOffsets(brokertest.Context(t, 30*time.Second), "power")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	for n := int64(0); n < total; {
		fs := cons.PollFetches(brokertest.Context(t, 30*time.Second))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)] = true
			n++
		})
	}
	var lost []string
	for _, v := range wantRecords {
		if !got[v] {
			lost = append(lost, v)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged records lost, e.g. %s\n%s", len(lost), len(wantRecords), strings.Join(lost[:min(5, len(lost))], " "), crashed.Dump())
	}
	fetched, err := end.FetchOffsets(brokertest.Context(t, 30*time.Second), "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("power", 0); !ok || o.At < wantCommitted {
		t.Fatalf("committed offset %+v after the power loss, %d was acknowledged", o, wantCommitted)
	}
	if err := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("power")).ProduceSync(brokertest.Context(t, 30*time.Second), kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestPowerLossKeepsTransactionOutcomes: a transactional producer commits
// and aborts transactions (two partitions each) on a broker on the
// in-memory filesystem; a power loss at a random moment keeps a random
// part of what was not fsynced. On what the disk would hold, a new broker
// must keep every outcome it acknowledged: every record of an
// acknowledged commit is read under read_committed (the coordinator
// finishes a commit whose markers were not written yet), none of an
// acknowledged abort; each transaction is all or nothing; and the
// transactional id's next InitProducerId never reuses an epoch.
func TestPowerLossKeepsTransactionOutcomes(t *testing.T) {
	for round := 0; round < memfs.Iterations(2); round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) { txnPowerLossRound(t, false) })
	}
}

// TestPowerLossAcrossATV2Rotation is TestPowerLossKeepsTransactionOutcomes
// for a transactional id whose epoch runs out a few commits in (a TV2
// client: every EndTxn bumps, the exhausted one rotates to a fresh
// producer id), with the power loss landing before, during or after the
// rotation. Complete* is written without an fsync of its own, so the
// rotation must already be durable in Prepare* (its NextProducerID): once
// the client has gone on under the fresh producer id, the broker never
// hands out the exhausted one again, and every outcome stands.
func TestPowerLossAcrossATV2Rotation(t *testing.T) {
	for round := 0; round < memfs.Iterations(2); round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) { txnPowerLossRound(t, true) })
	}
}

// seededPID is the producer id of the transactional id seeded near the
// end of its epochs: far above the ids the broker's allocator hands out
// in a test.
const seededPID = 1<<40 + 1<<35

func txnPowerLossRound(t *testing.T, rotate bool) {
	dir, m, start := memfsBrokerIn(t)
	need := 20 // acknowledged outcomes before the power loss
	if rotate {
		// InitProducerId bumps once, each EndTxn once more: the
		// twentieth or so rotates, and the power loss comes after 8 to
		// 17 outcomes and up to 20 ms more (before, around and after
		// the rotation).
		seedExhaustedTxnID(t, m, dir, "power-txn", 32743)
		need = 8 + rand.IntN(10)
	}
	b := start(m)
	brokertest.CreateTopic(t, b.Addr(), "ptx", 2, nil)
	var crashed *memfs.FS
	run := runTxnsUntil(t, b.Addr(), need, func() {
		crashed = m.Crash(memfs.CrashOptions{Rand: rand.New(rand.NewPCG(rand.Uint64(), 2))})
	})
	b.Close(context.Background()) // the lost machine

	b = start(crashed)
	t.Cleanup(func() { brokertest.Stop(t, b) })
	newPID, newEpoch := checkTxnOutcomes(t, b.Addr(), run, crashed.Dump)
	if rotate && run.pid != seededPID && newPID == seededPID {
		t.Fatalf("the client went on under producer id %d after the rotation; after the power loss it got the exhausted id %d back (epoch %d)",
			run.pid, newPID, newEpoch)
	}
	if rotate {
		t.Logf("before the power loss: producer id %d (seeded %d) epoch %d; after: %d epoch %d", run.pid, int64(seededPID), run.epoch, newPID, newEpoch)
	}
}

// txnRun is what a transactional producer was told before its broker
// was lost.
type txnRun struct {
	outcome map[int]bool // acknowledged: true committed, false aborted
	pid     int64        // producer id and epoch after the last acknowledged end
	epoch   int16
}

// runTxnsUntil runs transactions of one record on each of partitions 0
// and 1 of "ptx" as transactional id "power-txn" (every fourth aborted),
// and loses the broker (lose, called with the outcomes frozen) up to
// 20 ms after need outcomes were acknowledged.
func runTxnsUntil(t *testing.T, addr string, need int, lose func()) txnRun {
	t.Helper()
	cl := brokertest.Client(t, addr, powerTxnOpts()...)
	var mu sync.Mutex
	run := txnRun{outcome: map[int]bool{}, pid: -1, epoch: -1}
	ctx, cancel := context.WithCancel(context.Background())
	done, reached := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			if err := cl.BeginTransaction(); err != nil {
				return
			}
			for p := int32(0); p < 2; p++ {
				cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("t%05d-p%d", i, p))}, nil)
			}
			commit := i%4 != 3
			if err := cl.Flush(ctx); err != nil {
				commit = false
			}
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				return
			}
			id, e, _ := cl.ProducerID(ctx)
			mu.Lock()
			run.outcome[i], run.pid, run.epoch = commit, id, e
			if len(run.outcome) == need {
				close(reached)
			}
			mu.Unlock()
		}
	}()
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("fewer than %d transactions acknowledged within 60s", need)
	}
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	mu.Lock()
	lose()
	got := txnRun{outcome: maps.Clone(run.outcome), pid: run.pid, epoch: run.epoch}
	mu.Unlock()
	cancel()
	<-done
	cl.Close()
	return got
}

func powerTxnOpts() []kgo.Opt {
	return []kgo.Opt{kgo.TransactionalID("power-txn"), kgo.DefaultProduceTopic("ptx"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
}

// checkTxnOutcomes checks, on the broker that took over from the lost
// one, that every outcome run acknowledged stands: every record of an
// acknowledged commit is read under read_committed (the coordinator
// finishes a commit whose markers were not written yet), none of an
// acknowledged abort; each transaction is all or nothing; and the
// transactional id's next InitProducerId never reuses an epoch. It
// returns the producer id and epoch the client goes on with; dump
// describes the disk for a failure.
func checkTxnOutcomes(t *testing.T, addr string, run txnRun, dump func() string) (int64, int16) {
	t.Helper()
	// The transactional id again: its InitProducerId finishes or aborts
	// what the loss left open; a transaction after it marks the end of
	// both partitions under read_committed.
	cl := brokertest.Client(t, addr, powerTxnOpts()...)
	ctx := brokertest.Context(t, time.Minute)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("produce after the loss: %v", err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after the loss: %v", err)
	}
	newPID, newEpoch, _ := cl.ProducerID(ctx)
	if newPID == run.pid && newEpoch <= run.epoch {
		t.Fatalf("producer id %d epoch %d reused after the loss (last acknowledged: epoch %d)", newPID, newEpoch, run.epoch)
	}

	seen := map[string]int{}
	cons := brokertest.Client(t, addr, kgo.ConsumeTopics("ptx"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for seen["after"] < 2 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed did not reach the transaction after the loss: %v", seen)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	t.Logf("%d outcomes acknowledged; %d records read; pid %d epoch %d -> %d", len(run.outcome), len(seen), run.pid, run.epoch, newEpoch)
	perTxn := map[int]int{}
	for v, n := range seen {
		var i, p int
		if _, err := fmt.Sscanf(v, "t%05d-p%d", &i, &p); err == nil {
			if n != 1 {
				t.Fatalf("%s read %d times", v, n)
			}
			perTxn[i]++
		}
	}
	for i, committed := range run.outcome {
		if committed && perTxn[i] != 2 {
			t.Fatalf("acknowledged commit of transaction %d: %d of its 2 records read\n%s", i, perTxn[i], dump())
		}
		if !committed && perTxn[i] != 0 {
			t.Fatalf("acknowledged abort of transaction %d: %d of its records read", i, perTxn[i])
		}
	}
	for i, n := range perTxn {
		if n != 2 {
			t.Fatalf("transaction %d is half visible: %d of its 2 records", i, n)
		}
	}
	return newPID, newEpoch
}

// seedExhaustedTxnID writes, before any broker runs on m, a completed
// entry for id at producer id seededPID and the given epoch.
func seedExhaustedTxnID(t *testing.T, m *memfs.FS, dir, id string, epoch int16) {
	t.Helper()
	st, err := txnlog.Open(durable.Env{FS: m, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if err := st.Put(txnstate.Entry{TransactionalID: id, ProducerID: seededPID, Epoch: epoch, LastProducerID: -1, LastEpoch: -1,
		TimeoutMs: 60000, State: txnstate.CompleteCommit, TxnStartMs: -1, LastUpdateMs: now, TV: 2}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
