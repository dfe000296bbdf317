package sharepartition

import "time"

// locks is the share-partition's acquisition locks ordered by deadline (a
// binary min-heap), so the owner's timer (NextDeadline) and Expire cost
// the locks that are due, not a scan of every in-flight record after each
// message. Entries are not removed when a lock ends early (accept,
// release, reject, renew, reset): an entry is live only while its record
// is still Acquired with that very deadline, and dead ones are dropped
// when they come to the top, or all at once when they outnumber the
// window (so the heap stays within twice the in-flight records).
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

// lock records r's (at off) new deadline.
func (p *Partition) lock(off int64, r *record) {
	if len(p.locks) > 2*len(p.recs)+64 {
		p.rebuildLocks()
	}
	p.locks.push(lock{deadline: r.deadline, offset: off})
}

// live reports whether l is still a record's lock.
func (p *Partition) live(l lock) bool {
	i := l.offset - p.start
	if i < 0 || i >= int64(len(p.recs)) {
		return false
	}
	r := &p.recs[i]
	return r.state == Acquired && r.deadline.Equal(l.deadline)
}

// top drops dead entries and returns the earliest live lock.
func (p *Partition) top() (lock, bool) {
	for len(p.locks) > 0 {
		if l := p.locks[0]; p.live(l) {
			return l, true
		}
		p.locks.pop()
	}
	return lock{}, false
}

// rebuildLocks keeps only the live locks.
func (p *Partition) rebuildLocks() {
	old := p.locks
	p.locks = make(locks, 0, len(old)/2+1)
	for _, l := range old {
		if p.live(l) {
			p.locks.push(l)
		}
	}
}
