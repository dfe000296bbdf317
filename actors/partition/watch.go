package partition

import (
	"sync"
	"sync/atomic"
)

// Waiter is a long-poll fetch waiting for any of its partitions to publish
// a new view. A fetch over a thousand partitions registers with each once
// and, when woken, learns which ones changed, so it re-reads those alone;
// waiting instead on every view's Changed channel (reflect.Select) locked
// and queued on all of them at every wait and re-read every view after
// each wake-up.
type Waiter struct {
	// C receives (capacity one) when a watched partition publishes.
	C chan struct{}

	mu      sync.Mutex
	changed []int  // indices marked since the last Changed, each once
	marked  []bool // by index: in changed (so a busy partition adds itself once)
}

// NewWaiter makes a Waiter for partitions registered under indices
// 0..n-1; it watches nothing yet.
func NewWaiter(n int) *Waiter {
	return &Waiter{C: make(chan struct{}, 1), marked: make([]bool, n)}
}

// Mark records that the partition registered under index changed and
// wakes the waiter.
func (w *Waiter) Mark(index int) {
	w.mu.Lock()
	if !w.marked[index] {
		w.marked[index] = true
		w.changed = append(w.changed, index)
	}
	w.mu.Unlock()
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Changed takes the indices marked since the last call, each once, in
// marking order.
func (w *Waiter) Changed() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.changed
	for _, i := range out {
		w.marked[i] = false
	}
	w.changed = nil
	return out
}

// watchers are the Waiters registered on one partition; the actor tells
// them after each publish.
type watchers struct {
	n    atomic.Int32 // len(list), read without the lock by notify
	mu   sync.Mutex
	list []watch
}

type watch struct {
	w     *Waiter
	index int
}

// Watch has w marked with index whenever this partition publishes a new
// view, until Unwatch.
func (h *Handle) Watch(w *Waiter, index int) {
	ws := &h.watch
	ws.mu.Lock()
	ws.list = append(ws.list, watch{w: w, index: index})
	ws.n.Store(int32(len(ws.list)))
	ws.mu.Unlock()
}

// Unwatch ends every registration of w on this partition.
func (h *Handle) Unwatch(w *Waiter) {
	ws := &h.watch
	ws.mu.Lock()
	keep := ws.list[:0]
	for _, x := range ws.list {
		if x.w != w {
			keep = append(keep, x)
		}
	}
	clear(ws.list[len(keep):])
	ws.list = keep
	ws.n.Store(int32(len(ws.list)))
	ws.mu.Unlock()
}

// notify marks every registered waiter; with none (the common case for a
// partition nobody long-polls) it costs one atomic load.
func (ws *watchers) notify() {
	if ws.n.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, x := range ws.list {
		x.w.Mark(x.index)
	}
}
