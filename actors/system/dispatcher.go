package system

import (
	"sync"
	"sync/atomic"
	"time"
)

// pooledDispatcher runs mailbox batches on reused goroutines instead of
// protoactor's default of one new goroutine per mailbox wake-up.
//
// Why: a new goroutine starts with a small stack, and an actor's frames
// outgrow it, so every wake-up paid a stack copy (runtime.newstack/
// copystack: 57% of the CPU of a message round trip; 6.0 µs per round
// trip against 1.4 µs with reused goroutines, measured by `kaas bench
// actor`). A worker keeps its grown stack across wake-ups.
//
// Schedule never blocks: with no idle worker it starts a new one, so the
// pool has no size limit, as the default dispatcher has none.
//
// How a batch reaches a worker is the hot path of every actor message
// (`kaas bench actor`): each idle worker waits on its own channel, and
// Schedule takes the most recently idled one off a stack (its stack and
// caches are the warmest). An earlier version had every idle worker wait
// in a select over a shared work channel, a stop channel and an idle
// timer, re-armed after every batch; under callgrind the select, its
// channel locks and the timer were a third of a round trip's
// instructions. Idle workers are now retired by one sweep every
// workerIdle instead: those that stayed at the bottom of the stack for a
// whole interval exit.
type pooledDispatcher struct {
	throughput int

	mu   sync.Mutex
	idle []*worker // idle workers, most recently idled last
	// lowWater is the fewest idle workers since the last sweep: the
	// bottom lowWater of idle sat unused for the whole interval.
	lowWater int
	sweeper  *time.Timer
	closed   bool

	// wakeups counts Schedule calls (a mailbox woken: one hand-off to
	// another goroutine), started those that started a new worker; read
	// by Wakeups, for the metrics and the bench's hand-offs per
	// transaction.
	wakeups, started atomic.Int64
}

// worker is one pooled goroutine; it gets its next batch on next (nil:
// exit).
type worker struct{ next chan func() }

// workerIdle is short: a burst (opening a thousand partitions starts
// dozens of workers) should give its goroutine stacks back within
// seconds, and a worker costs only a goroutine start to replace.
const workerIdle = 2 * time.Second

func newPooledDispatcher(throughput int) *pooledDispatcher {
	d := &pooledDispatcher{throughput: throughput}
	d.sweeper = time.AfterFunc(workerIdle, d.sweep)
	return d
}

func (d *pooledDispatcher) Schedule(fn func()) {
	d.wakeups.Add(1)
	d.mu.Lock()
	if n := len(d.idle); n > 0 && !d.closed {
		w := d.idle[n-1]
		d.idle[n-1] = nil
		d.idle = d.idle[:n-1]
		d.lowWater = min(d.lowWater, n-1)
		d.mu.Unlock()
		w.next <- fn // buffered: never blocks
		return
	}
	d.mu.Unlock()
	d.started.Add(1)
	go d.run(&worker{next: make(chan func(), 1)}, fn)
}

func (d *pooledDispatcher) Throughput() int { return d.throughput }

func (d *pooledDispatcher) run(w *worker, fn func()) {
	for fn != nil {
		fn()
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		d.idle = append(d.idle, w)
		d.mu.Unlock()
		fn = <-w.next
	}
}

// sweep retires the workers that stayed idle since the last sweep and
// re-arms itself.
func (d *pooledDispatcher) sweep() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	old := d.idle[:d.lowWater]
	for _, w := range old {
		w.next <- nil
	}
	d.idle = append(d.idle[:0:0], d.idle[d.lowWater:]...)
	d.lowWater = len(d.idle)
	d.sweeper.Reset(workerIdle)
}

// close makes idle workers exit, and busy ones once their batch is done.
func (d *pooledDispatcher) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.sweeper.Stop()
	for _, w := range d.idle {
		w.next <- nil
	}
	d.idle = nil
}

// idleWorkers is the number of workers waiting for a batch (tests).
func (d *pooledDispatcher) idleWorkers() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.idle)
}
