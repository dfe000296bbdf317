package sharepartition

import "time"

// locks is the share-partition's acquisition locks ordered by deadline (a
// binary min-heap), so the owner's timer (NextDeadline) and Expire cost
// the locks that are due, not a scan of every in-flight entry after each
// message. An entry names its run by the run's first offset. Entries are
// not removed when a lock ends early (accept, release, reject, renew,
// reset, a split): an entry is live only while a run starting at that
// offset is still Acquired with that very deadline, and dead ones are
// dropped when they come to the top, or all at once when they outnumber
// the runs (so the heap stays within twice the in-flight entries).
type locks []lock

type lock struct {
	deadline time.Time
	offset   int64
}

func (h *locks) push(l lock) {
	*h = append(*h, l)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].deadline.Before(s[parent].deadline) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *locks) pop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < n && s[l].deadline.Before(s[small].deadline) {
			small = l
		}
		if r < n && s[r].deadline.Before(s[small].deadline) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
}

// lock records r's new deadline; r must be in the window (its entry
// names it by its first offset).
func (p *Partition) lock(r *run) {
	if len(p.locks) > 2*len(p.runs)+64 {
		p.rebuildLocks()
	}
	p.locks.push(lock{deadline: r.deadline, offset: r.first})
}

// live is the index of the run l still locks, or -1.
func (p *Partition) live(l lock) int {
	if l.offset < p.start || l.offset >= p.next {
		return -1
	}
	i := p.find(l.offset)
	if r := &p.runs[i]; r.first == l.offset && r.state == Acquired && r.deadline.Equal(l.deadline) {
		return i
	}
	return -1
}

// top drops dead entries and returns the earliest live lock and its run.
func (p *Partition) top() (lock, int, bool) {
	for len(p.locks) > 0 {
		if l := p.locks[0]; p.live(l) >= 0 {
			return l, p.live(l), true
		}
		p.locks.pop()
	}
	return lock{}, -1, false
}

// rebuildLocks keeps only the live locks.
func (p *Partition) rebuildLocks() {
	old := p.locks
	p.locks = make(locks, 0, len(old)/2+1)
	for _, l := range old {
		if p.live(l) >= 0 {
			p.locks.push(l)
		}
	}
}
