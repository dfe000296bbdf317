package broker

import (
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/model/slots"
)

// doubtWindow puts a lease in doubt while one write runs: once armed,
// the next lease check (the write starting) answers alive and the one
// after (its fsync back) in doubt; every check after that answers alive
// again.
type doubtWindow struct {
	mu     sync.Mutex
	checks int // lease checks left to the armed write: 2, 1, then 0 (disarmed)
	fired  bool
}

// inDoubt is one lease check.
func (d *doubtWindow) inDoubt() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.checks == 0 {
		return false
	}
	d.checks--
	if d.checks == 0 {
		d.fired = true
		return true
	}
	return false
}

func (d *doubtWindow) arm() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checks = 2
}

func (d *doubtWindow) didFire() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

// doubtDuringWrite is a doubtWindow on one transaction slot's lease.
type doubtDuringWrite struct {
	slot int
	doubtWindow
}

func (d *doubtDuringWrite) hooks(c *Config) {
	c.testHooks = &testHooks{leaseInDoubt: func(kind, n int) bool {
		return kind == txnSlots && n == d.slot && d.inDoubt()
	}}
}

// TestTV2AddDurableAfterLeaseDoubtIsNotVerified is the torn commit of a
// chaos run (txn-incomplete: one partition of a committed transaction
// invisible to read_committed, its records later covered by an ABORT): a
// TV2 implicit add whose Ongoing entry was fsynced only after the slot's
// lease fell in doubt is answered as failed, and the coordinator keeps
// its entry without the partition; the producer's retry of that batch
// must go back to the coordinator, which adds the partition then. The
// lock-free view that produce verification reads had published the
// refused entry, so the retry was verified from it and appended, the
// commit's markers left the partition out, and its records stayed in an
// open transaction that a later abort of the producer ended.
func TestTV2AddDurableAfterLeaseDoubtIsNotVerified(t *testing.T) {
	const id, topic = "doubt-txn", "doubt"
	d := &doubtDuringWrite{slot: slots.Of(id)}
	b := startTxnBroker(t, t.TempDir(), d.hooks)
	createTopic(t, b, topic, 2)
	ctx := testCtx(t)
	cl := txnProducer(t, b, id, topic)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, cl, 0, "p0"); err != nil {
		t.Fatal(err)
	}
	// Partition 1's add is written, then refused: the producer retries
	// its batch (NOT_ENOUGH_REPLICAS) and the retry is acknowledged.
	d.arm()
	if err := produceIn(t, ctx, cl, 1, "p1"); err != nil {
		t.Fatal(err)
	}
	if !d.didFire() {
		t.Fatal("the lease was never in doubt while partition 1's add was written")
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	got := consumeAll(t, b, topic, kgo.ReadCommitted())
	slices.Sort(got)
	if want := []string{"p0", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed after the commit: %q, want %q (partition 1 left out of the transaction's markers)", got, want)
	}
}
