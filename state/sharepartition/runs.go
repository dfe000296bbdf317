package sharepartition

import (
	"sort"
	"time"
)

// run is one in-flight entry: the offsets [first, last] with one state,
// delivery count, holder and lock (Apache's InFlightBatch; Apache keeps a
// per-offset map inside a batch once it is split, here the entry itself
// is split into the parts that differ, so a record acknowledged on its
// own becomes an entry of one offset).
type run struct {
	first, last int64
	state       State
	deliveries  int16
	member      string    // holder while Acquired
	deadline    time.Time // lock expiry while Acquired
}

func (r *run) len() int64 { return r.last - r.first + 1 }

// find is the index of the run holding off, which must be in the window.
func (p *Partition) find(off int64) int {
	return sort.Search(len(p.runs), func(i int) bool { return p.runs[i].last >= off })
}

// cut makes a run start at off (inside the window, or at next) and
// returns its index: the run holding off is split in two, both halves
// keeping its state and lock.
func (p *Partition) cut(off int64) int {
	if off >= p.next {
		return len(p.runs)
	}
	i := p.find(off)
	r := p.runs[i]
	if r.first == off {
		return i
	}
	right := r
	right.first = off
	p.runs[i].last = off - 1
	p.runs = append(p.runs, run{})
	copy(p.runs[i+2:], p.runs[i+1:])
	p.runs[i+1] = right
	if right.state == Acquired {
		p.lock(&right) // the lock's entry names its run by first offset
	}
	return i + 1
}

// isolate splits runs so that [first, last] (inside the window) is
// covered by whole runs, and returns their index range [i, j).
func (p *Partition) isolate(first, last int64) (int, int) {
	i := p.cut(first)
	j := p.cut(last + 1)
	return i, j
}

// appendRun adds a run past the window's end.
func (p *Partition) appendRun(r run) {
	p.runs = append(p.runs, r)
	p.next = r.last + 1
	if r.state == Acquired {
		p.lock(&p.runs[len(p.runs)-1])
	}
}
