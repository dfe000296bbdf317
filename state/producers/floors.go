package producers

import "sync"

// Floors is the broker-wide fence floor map pid → epoch (R-FEN-2). Every
// partition consults it whenever it looks a producer up (a batch, a
// marker, a describe), so raising a floor fences the producer on every
// partition of the broker at once — including those that never saw it —
// with one map write instead of a message to each partition actor.
// Written by the fence broadcaster, read by partitions.
//
// Beside the fence floors it holds the end floors of TV2 transactions
// (R-TV2-7): pid → epoch below which no new data batch is taken. A fence
// floor makes the producer's state on every partition that epoch (its
// window goes, a retry of a written batch at the old epoch is refused);
// an end floor leaves state alone and refuses only a batch that is not a
// retry, and markers never consult it.
type Floors struct {
	mu   sync.RWMutex
	m    map[int64]int16
	ends map[int64]int16
}

// NewFloors returns an empty floor map.
func NewFloors() *Floors { return &Floors{m: make(map[int64]int16), ends: make(map[int64]int16)} }

// RaiseEnd sets pid's end floor to epoch if that is higher (R-TV2-7): a
// TV2 transaction ending at epoch-1 refuses its late data everywhere on
// this broker before EndTxn is answered.
func (f *Floors) RaiseEnd(pid int64, epoch int16) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.ends[pid]; !ok || cur < epoch {
		f.ends[pid] = epoch
	}
}

// End returns pid's end floor.
func (f *Floors) End(pid int64) (int16, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, ok := f.ends[pid]
	return e, ok
}

// DropEnd forgets pid's end floor if it is still epoch: every marker of
// the transaction it guarded is durable, and they fence its late data.
func (f *Floors) DropEnd(pid int64, epoch int16) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.ends[pid]; ok && cur == epoch {
		delete(f.ends, pid)
	}
}

// Raise sets pid's floor to epoch if that is higher and reports whether it
// changed.
func (f *Floors) Raise(pid int64, epoch int16) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.m[pid]; ok && cur >= epoch {
		return false
	}
	f.m[pid] = epoch
	return true
}

// Drop forgets pid's floor (its fence expired with its transactional id).
func (f *Floors) Drop(pid int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, pid)
	delete(f.ends, pid)
}

// Get returns pid's floor.
func (f *Floors) Get(pid int64) (int16, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, ok := f.m[pid]
	return e, ok
}

// Len is how many producer ids have a floor.
func (f *Floors) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.m)
}

// Snapshot copies the map (for the inspector).
func (f *Floors) Snapshot() map[int64]int16 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[int64]int16, len(f.m))
	for k, v := range f.m {
		out[k] = v
	}
	return out
}
