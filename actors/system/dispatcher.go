package system

import (
	"sync"
	"time"
)

// pooledDispatcher runs mailbox batches on reused goroutines instead of
// protoactor's default of one new goroutine per mailbox wake-up.
//
// Why: a new goroutine starts with a small stack, and the receiver
// middleware (panic recovery) plus an actor's own frames outgrow it, so
// every wake-up paid a stack copy (runtime.newstack/copystack: 57% of the
// CPU of a message round trip; 6.0 µs per round trip against 1.4 µs with
// reused goroutines, measured by `kaas bench actor`). A worker keeps its
// grown stack across wake-ups.
//
// Schedule never blocks: with no idle worker it starts a new one, so the
// pool has no size limit, as the default dispatcher has none. Idle workers
// exit after workerIdle.
type pooledDispatcher struct {
	work       chan func()
	stop       chan struct{} // closed by System.Shutdown: idle workers exit
	stopOnce   sync.Once
	throughput int
}

const workerIdle = 10 * time.Second

func newPooledDispatcher(throughput int) *pooledDispatcher {
	return &pooledDispatcher{work: make(chan func()), stop: make(chan struct{}), throughput: throughput}
}

// Schedule hands fn to an idle worker, or starts one.
func (d *pooledDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		go d.worker(fn)
	}
}

// Throughput is how many messages a mailbox processes before yielding.
func (d *pooledDispatcher) Throughput() int { return d.throughput }

func (d *pooledDispatcher) worker(fn func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(workerIdle)
		select {
		case fn = <-d.work:
		case <-idle.C:
			return
		case <-d.stop:
			return
		}
	}
}

// close lets idle workers exit (busy ones exit when their batch ends).
func (d *pooledDispatcher) close() { d.stopOnce.Do(func() { close(d.stop) }) }
