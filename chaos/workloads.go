package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The topics every run writes, with as many partitions each.
const (
	idemTopic  = "chaos-idem" // idempotent producers
	txnTopic   = "chaos-txn"  // transactional producers; the exactly-once group's input
	outTopic   = "chaos-out"  // the exactly-once group's output
	partitions = 6
	// txnTimeout is every transactional client's transaction timeout: a
	// transaction its client gave up on is aborted by its coordinator
	// after this long.
	txnTimeout = 10 * time.Second
)

var topics = map[string]int32{idemTopic: partitions, txnTopic: partitions, outTopic: partitions}

// worker is what every workload shares: its name, its seeded randomness,
// its client timeout (1–3 s, drawn from the seed) and the cluster.
type worker struct {
	c       *cluster
	rec     *Recorder
	name    string // "i1", "t2", "c1"
	inc     int    // client incarnation
	rng     *rand.Rand
	timeout time.Duration
	logf    func(string, ...any)

	mu     sync.Mutex
	closer func() // closes the worker's current client (abandon)
}

// holding notes how to close the worker's current client, and returns
// a close that runs it once, whoever asks first (the worker, or the
// harness abandoning it).
func (w *worker) holding(close func()) func() {
	var once sync.Once
	c := func() { once.Do(close) }
	w.mu.Lock()
	w.closer = c
	w.mu.Unlock()
	return c
}

// abandon closes the worker's client from outside: a franz-go call that
// waits without a deadline (an InitProducerId retried while the last
// transaction cannot complete) returns once its client is closed.
func (w *worker) abandon() {
	w.mu.Lock()
	c := w.closer
	w.mu.Unlock()
	if c != nil {
		c()
	}
}

func newWorker(c *cluster, seed uint64, name string, logf func(string, ...any)) *worker {
	var h uint64
	for _, b := range []byte(name) {
		h = h*131 + uint64(b)
	}
	rng := rand.New(rand.NewPCG(seed, h))
	return &worker{c: c, rec: c.rec, name: name, rng: rng, timeout: time.Second + time.Duration(rng.Int64N(int64(2*time.Second))), logf: logf}
}

// process names the worker's current client, as values and the history do.
func (w *worker) process() string { return fmt.Sprintf("%s.%d", w.name, w.inc) }

// send produces one record and records it; done runs after its outcome
// is recorded.
func (w *worker) send(cl *kgo.Client, txn, topic string, p int32, value string, done func(error)) {
	proc := w.process()
	id := w.rec.Invoke(Event{Process: proc, F: Send, Txn: txn, Rec: &Rec{Topic: topic, Partition: p, Offset: -1, Value: value}})
	cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}, func(r *kgo.Record, err error) {
		if err == nil {
			w.rec.Complete(id, OK, Event{Process: proc, F: Send, Txn: txn, Rec: &Rec{Topic: topic, Partition: p, Offset: r.Offset, Value: value}})
		} else {
			// A failed produce may still have been written: its outcome is
			// unknown, as Jepsen records it.
			w.rec.Complete(id, Info, Event{Process: proc, F: Send, Txn: txn, Err: err.Error()})
		}
		if done != nil {
			done(err)
		}
	})
}

// runIdempotent produces single records to random partitions, up to 8 in
// flight, until ctx ends.
func (w *worker) runIdempotent(ctx context.Context) {
	cl, err := kgo.NewClient(w.c.clientOpts(w.timeout, w.name)...)
	if err != nil {
		w.logf("%s: %v", w.name, err)
		return
	}
	defer w.holding(cl.Close)()
	window := make(chan struct{}, 8)
	for seq := int64(0); ; seq++ {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = cl.Flush(fctx)
			cancel()
			return
		case window <- struct{}{}:
		}
		w.send(cl, "", idemTopic, int32(w.rng.IntN(partitions)), idempotentValue(w.process(), seq), func(error) { <-window })
		time.Sleep(5 * time.Millisecond)
	}
}

// runTransactional runs transactions of 1–4 records each until ctx
// ends: most commit, one in five aborts, and any with a failed record
// aborts. A transaction whose end is of unknown outcome (or any client
// error) retires the client: the next one's InitProducerId fences it.
func (w *worker) runTransactional(ctx context.Context) {
	var cl *kgo.Client
	var closeClient func()
	defer func() {
		if cl != nil {
			closeClient()
		}
	}()
	retire := func() {
		closeClient()
		cl = nil
		w.inc++
		time.Sleep(100 * time.Millisecond) // no spin on a client that fails at once
	}
	for n := int64(0); ctx.Err() == nil; {
		if cl == nil {
			opts := append(w.c.clientOpts(w.timeout, w.name), kgo.TransactionalID("chaos-"+w.name), kgo.TransactionTimeout(txnTimeout))
			var err error
			if cl, err = kgo.NewClient(opts...); err != nil {
				w.logf("%s: %v", w.name, err)
				return
			}
			closeClient = w.holding(cl.Close)
		}
		if err := cl.BeginTransaction(); err != nil {
			retire()
			continue
		}
		n++
		txn := txnID(w.process(), n)
		var b batch
		for i := range 1 + w.rng.IntN(4) {
			b.send(w, cl, txn, txnTopic, int32(w.rng.IntN(partitions)), txnValue(txn, i))
		}
		intent := Commit
		if w.rng.IntN(5) == 0 {
			intent = Abort
		}
		if !b.flush(cl) {
			retire()
			b.wg.Wait()
			continue
		}
		if b.failed.Load() {
			intent = Abort
		}
		t, err := w.end(txn, intent, func(try kgo.TransactionEndTry) (bool, error) {
			ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := cl.EndTransaction(ectx, try)
			if err != nil && try == kgo.TryCommit && (errors.Is(err, kerr.OperationNotAttempted) || errors.Is(err, kerr.TransactionAbortable)) {
				// The commit was not attempted: abort instead.
				if cl.EndTransaction(ectx, kgo.TryAbort) == nil {
					return false, nil
				}
			}
			return err == nil && try == kgo.TryCommit, err
		})
		if t == Info || err != nil {
			retire()
		}
	}
}

// end records a transaction's end around do, which ends it as try and
// says whether it committed; an error makes the outcome unknown.
func (w *worker) end(txn, intent string, do func(kgo.TransactionEndTry) (bool, error), inputs ...Rec) (Type, error) {
	proc := w.process()
	id := w.rec.Invoke(Event{Process: proc, F: End, Txn: txn, Intent: intent, Recs: inputs})
	try := kgo.TryAbort
	if intent == Commit {
		try = kgo.TryCommit
	}
	committed, err := do(try)
	var t Type
	switch {
	case err != nil:
		t = Info
	case committed == (intent == Commit):
		t = OK
	case intent == Commit:
		t = Fail // certainly aborted
	default:
		t = Info // asked to abort, reported committed: nothing to trust
	}
	e := Event{Process: proc, F: End, Txn: txn}
	if err != nil {
		e.Err = err.Error()
	}
	w.rec.Complete(id, t, e)
	return t, err
}

// batch is one transaction's sends: how many are in flight and whether
// any failed.
type batch struct {
	wg     sync.WaitGroup
	failed atomic.Bool
}

func (b *batch) send(w *worker, cl *kgo.Client, txn, topic string, p int32, value string) {
	b.wg.Add(1)
	w.send(cl, txn, topic, p, value, func(err error) {
		if err != nil {
			b.failed.Store(true)
		}
		b.wg.Done()
	})
}

// flush waits for every send's outcome, and is false when the client
// could not deliver them within 30 s: the caller retires the client
// (whose Close fails what is left, so every send gets an outcome) and
// then waits for b.wg.
func (b *batch) flush(cl *kgo.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cl.Flush(ctx) != nil {
		return false
	}
	b.wg.Wait()
	return true
}
