package broker

// End-to-end transaction and KIP-360 tests through franz-go (issue 3):
// zombie fencing, commit/abort mixes under both isolation levels, rejoin
// mid-transaction, the timeout reaper, and a coordinator crash between
// PrepareCommit and its markers.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/txnstate"
	"kaas/storage/durable"
	"kaas/storage/txnlog"
)

// startTxnBroker starts a broker on an ephemeral port and stops it when
// the test ends.
func startTxnBroker(t *testing.T, dataDir string, mutate ...func(*Config)) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminAddr = ""
	cfg.DataDir = dataDir
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b
}

func newClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, b *Broker, name string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, b))
	resp, err := adm.CreateTopic(context.Background(), partitions, 1, nil, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, resp.Err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// consumeAll reads topic from the start until it has seen the end of every
// partition (per the isolation level's end) and returns the values.
func consumeAll(t *testing.T, b *Broker, topic string, isolation kgo.IsolationLevel) []string {
	t.Helper()
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	var ends kadm.ListedOffsets
	var err error
	if isolation == kgo.ReadCommitted() {
		awaitMarkers(t, b)
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Control records are kept so that positions advance past markers even
	// when every data record of a range was aborted.
	cl := newClient(t, b, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(isolation),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	var out []string
	done := func(pos map[int32]int64) bool {
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if pos[o.Partition] < o.Offset {
				ok = false
			}
		})
		return ok
	}
	pos := map[int32]int64{}
	for !done(pos) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming %s: %v (have %v, want %v)", topic, err, pos, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, string(r.Value))
			}
			if r.Offset+1 > pos[r.Partition] {
				pos[r.Partition] = r.Offset + 1
			}
		})
	}
	return out
}

func txnProducer(t *testing.T, b *Broker, id, topic string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, b, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

func produceIn(t *testing.T, ctx context.Context, cl *kgo.Client, partition int32, values ...string) error {
	t.Helper()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: partition}).FirstErr(); err != nil {
			return err
		}
	}
	return nil
}

func isFenced(err error) bool {
	return errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.ProducerFenced)
}

// A second producer with the same transactional.id fences the first: the
// zombie's next batch (on a partition it used and on one it never touched)
// and its EndTxn are rejected, and read_committed sees only the new
// session's data (seed contract; R-IPI-10, R-FEN-1/2).
func TestZombieProducerIsFencedOnProduceAndEndTxn(t *testing.T) {
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "zombie", 3)
	ctx := testCtx(t)

	old := txnProducer(t, b, "zombie-txn", "zombie")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, old, 0, "old-1"); err != nil {
		t.Fatal(err)
	}

	// The new session's InitProducerId aborts the old transaction and bumps
	// the epoch (franz-go retries the CONCURRENT_TRANSACTIONS itself).
	cur := txnProducer(t, b, "zombie-txn", "zombie")
	if err := cur.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, cur, 0, "new-1"); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, cur, 1, "new-2"); err != nil {
		t.Fatal(err)
	}

	if err := produceIn(t, ctx, old, 0, "old-2"); !isFenced(err) {
		t.Fatalf("zombie produce on its partition: %v, want fenced", err)
	}
	zombieRaw := newClient(t, b)
	if code := rawTxnProduce(t, ctx, zombieRaw, "zombie-txn", "zombie", 2, old); !isFencedCode(code) {
		t.Fatalf("zombie produce on an untouched partition: %v", kerr.ErrorForCode(code))
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("zombie EndTxn committed")
	}
	if err := cur.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, b, "zombie", kgo.ReadCommitted())
	if fmt.Sprint(sorted(got)) != "[new-1 new-2]" {
		t.Fatalf("read_committed saw %v, want only the new session's records", got)
	}
}

func isFencedCode(code int16) bool {
	return code == kerr.InvalidProducerEpoch.Code || code == kerr.ProducerFenced.Code
}

// rawTxnProduce sends one transactional batch with the zombie client's
// identity to a partition it never wrote to, bypassing the client's own
// state machine, and returns the partition's error code.
func rawTxnProduce(t *testing.T, ctx context.Context, via *kgo.Client, txnID, topic string, partition int32, zombie *kgo.Client) int16 {
	t.Helper()
	pid, epoch, _ := zombie.ProducerID(ctx)
	if pid < 0 {
		t.Fatal("zombie has no producer id")
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	req.TransactionID = kmsg.StringPtr(txnID)
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = recordBatch(pid, epoch, 0, true, "zombie")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, via)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// Several transactions over three partitions, alternately committed and
// aborted: read_committed sees exactly the committed records,
// read_uncommitted every record (R-RC-1..3).
func TestCommitAbortMixUnderBothIsolationLevels(t *testing.T) {
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "mix", 3)
	ctx := testCtx(t)
	p := txnProducer(t, b, "mix-txn", "mix")
	var committed, all []string
	for round := 0; round < 6; round++ {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := int32(0); part < 3; part++ {
			v := fmt.Sprintf("r%d-p%d", round, part)
			if err := produceIn(t, ctx, p, part, v); err != nil {
				t.Fatal(err)
			}
			all = append(all, v)
			if round%2 == 0 {
				committed = append(committed, v)
			}
		}
		commit := kgo.TryCommit
		if round%2 == 1 {
			commit = kgo.TryAbort
		}
		if err := p.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	if got := consumeAll(t, b, "mix", kgo.ReadCommitted()); fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(committed)) {
		t.Fatalf("read_committed: %v\nwant %v", sorted(got), sorted(committed))
	}
	if got := consumeAll(t, b, "mix", kgo.ReadUncommitted()); fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(all)) {
		t.Fatalf("read_uncommitted: %v\nwant %v", sorted(got), sorted(all))
	}
}

// Rejoin mid-Ongoing: InitProducerId while a transaction is open answers
// CONCURRENT_TRANSACTIONS after aborting it at epoch + 1; the retry gets
// epoch + 2, and the old records are aborted (R-IPI-10, S-11).
func TestRejoinMidOngoingAbortsThenBumpsTwice(t *testing.T) {
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "rejoin", 1)
	ctx := testCtx(t)
	p := txnProducer(t, b, "rejoin-txn", "rejoin")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, p, 0, "doomed-1", "doomed-2"); err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := p.ProducerID(ctx)

	raw := newClient(t, b)
	init := func() *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr("rejoin-txn")
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := init()
	if first.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("rejoin mid-transaction: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(first.ErrorCode))
	}
	var second *kmsg.InitProducerIDResponse
	for deadline := time.Now().Add(10 * time.Second); ; {
		second = init()
		if second.ErrorCode != kerr.ConcurrentTransactions.Code || time.Now().After(deadline) {
			break
		}
	}
	if second.ErrorCode != 0 || second.ProducerID != pid || second.ProducerEpoch != epoch+2 {
		t.Fatalf("retry: %v pid %d epoch %d, want pid %d epoch %d", kerr.ErrorForCode(second.ErrorCode),
			second.ProducerID, second.ProducerEpoch, pid, epoch+2)
	}
	if got := consumeAll(t, b, "rejoin", kgo.ReadCommitted()); len(got) != 0 {
		t.Fatalf("read_committed saw the aborted records: %v", got)
	}
	if err := produceIn(t, ctx, p, 0, "zombie"); !isFenced(err) {
		t.Fatalf("old session produce: %v, want fenced", err)
	}
}

// The timeout reaper aborts an overdue transaction at a bumped epoch and
// fences the producer (R-TXN-9, S-41).
func TestTimeoutReaperAbortsAndFences(t *testing.T) {
	b := startTxnBroker(t, t.TempDir(), func(c *Config) { c.TxnAbortInterval = 50 * time.Millisecond })
	createTopic(t, b, "reap", 1)
	ctx := testCtx(t)
	p := txnProducer(t, b, "reap-txn", "reap", kgo.TransactionTimeout(300*time.Millisecond))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, p, 0, "late"); err != nil {
		t.Fatal(err)
	}
	_, epoch, _ := p.ProducerID(ctx)
	e := waitForEntry(t, b, "reap-txn", func(e txnstate.Entry) bool { return e.State == txnstate.CompleteAbort })
	if e.Epoch != epoch+1 {
		t.Fatalf("reaper abort left epoch %d, want %d", e.Epoch, epoch+1)
	}
	if err := produceIn(t, ctx, p, 0, "after-reap"); !isFenced(err) {
		t.Fatalf("produce after the reaper: %v, want fenced", err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("EndTxn after the reaper committed")
	}
	if got := consumeAll(t, b, "reap", kgo.ReadCommitted()); len(got) != 0 {
		t.Fatalf("read_committed saw reaped records: %v", got)
	}
}

// awaitMarkers waits until no transaction's markers are out: a TV2
// EndTxn is answered before them (R-TV2-7), so what a read_committed
// consumer sees right after a commit may still stop short of it.
func awaitMarkers(t *testing.T, b *Broker) {
	t.Helper()
	eventually(t, "every ended transaction's markers are durable", func() bool {
		for _, e := range b.txnStore().All() {
			if e.State.IsPrepare() {
				return false
			}
		}
		return true
	})
}

func waitForEntry(t *testing.T, b *Broker, id string, ok func(txnstate.Entry) bool) txnstate.Entry {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		e, found := b.txnStore().Get(id)
		if found && ok(e) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry %s never reached the expected state; last %+v (found %v)", id, e, found)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A broker that stops after PrepareCommit is durable but before any marker
// is written finishes the transaction on restart (R-TXN-3, S-47): no half-
// visible transaction, the records become visible to read_committed, and
// the entry reaches CompleteCommit unaided.
func TestCrashBetweenPrepareCommitAndMarkersCompletesOnRestart(t *testing.T) {
	dir := t.TempDir()
	b := startTxnBroker(t, dir)
	createTopic(t, b, "crash", 2)
	ctx := testCtx(t)
	p := txnProducer(t, b, "crash-txn", "crash")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, p, 0, "a"); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, p, 1, "b"); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// What a crash right after persisting PrepareCommit leaves behind.
	st, err := txnlog.Open(durable.Env{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := st.Get("crash-txn")
	if e.State != txnstate.Ongoing {
		t.Fatalf("entry before the crash: %+v", e)
	}
	e.State = txnstate.PrepareCommit
	if err := st.Put(e); err != nil {
		t.Fatal(err)
	}
	st.Close()

	b2 := startTxnBroker(t, dir)
	waitForEntry(t, b2, "crash-txn", func(e txnstate.Entry) bool { return e.State == txnstate.CompleteCommit })
	if got := consumeAll(t, b2, "crash", kgo.ReadCommitted()); fmt.Sprint(sorted(got)) != "[a b]" {
		t.Fatalf("read_committed after recovery: %v", got)
	}
}
