package producers

import "sync"

// Floors is the broker-wide fence floor map pid → epoch (R-FEN-2). Every
// partition consults it whenever it looks a producer up, so raising a
// floor fences the producer on every partition of the broker at once —
// the ones that never saw it included — without a message to each.
// Written by the fence broadcaster, read by partitions.
//
// It also records which partitions hold state for each producer id, so the
// broadcaster's eager fan-out (which clears duplicate windows right away
// and keeps DescribeProducers current) only visits those.
type Floors struct {
	mu sync.RWMutex
	m  map[int64]int16

	holdersMu sync.Mutex
	holders   map[int64]map[Holder]struct{}
}

// Holder is a partition actor holding state for some producer ids.
type Holder interface{ Send(msg any) }

// NewFloors returns an empty floor map.
func NewFloors() *Floors {
	return &Floors{m: make(map[int64]int16), holders: make(map[int64]map[Holder]struct{})}
}

func (f *Floors) hold(pid int64, h Holder) {
	if h == nil {
		return
	}
	f.holdersMu.Lock()
	defer f.holdersMu.Unlock()
	set := f.holders[pid]
	if set == nil {
		set = make(map[Holder]struct{})
		f.holders[pid] = set
	}
	set[h] = struct{}{}
}

func (f *Floors) release(pid int64, h Holder) {
	if h == nil {
		return
	}
	f.holdersMu.Lock()
	defer f.holdersMu.Unlock()
	if set := f.holders[pid]; set != nil {
		delete(set, h)
		if len(set) == 0 {
			delete(f.holders, pid)
		}
	}
}

// Holders lists the partitions holding state for pid.
func (f *Floors) Holders(pid int64) []Holder {
	f.holdersMu.Lock()
	defer f.holdersMu.Unlock()
	out := make([]Holder, 0, len(f.holders[pid]))
	for h := range f.holders[pid] {
		out = append(out, h)
	}
	return out
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

// Get returns pid's floor.
func (f *Floors) Get(pid int64) (int16, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, ok := f.m[pid]
	return e, ok
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
