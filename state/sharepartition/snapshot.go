package sharepartition

// Snapshot is what a share-partition persists (Apache's share coordinator
// keeps the same in __share_group_state: the start offset and the state
// batches of the window). Locks are not persisted: a record Acquired at
// the time is Available after a restart, with its delivery count, so it
// is delivered again at once rather than after its lock — as Apache,
// whose ShareCoordinator writes an acquired record as AVAILABLE.
type Snapshot struct {
	Start int64
	Runs  []Run
}

// Run is consecutive offsets with one state and one delivery count.
type Run struct {
	First, Last int64
	State       State // Available, Acknowledged or Archived
	Deliveries  int16
}

// Snapshot encodes the window as runs.
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{Start: p.start}
	for i := range p.recs {
		r := p.recs[i]
		st := r.state
		if st == Acquired {
			st = Available
		}
		off := p.start + int64(i)
		if n := len(s.Runs); n > 0 && s.Runs[n-1].Last == off-1 && s.Runs[n-1].State == st && s.Runs[n-1].Deliveries == r.deliveries {
			s.Runs[n-1].Last = off
			continue
		}
		s.Runs = append(s.Runs, Run{First: off, Last: off, State: st, Deliveries: r.deliveries})
	}
	return s
}

// Restore rebuilds a share-partition from a snapshot. Runs must be
// ordered, disjoint and at or above Start; holes between them are
// Available records never delivered.
func Restore(s Snapshot, cfg Config) *Partition {
	p := New(s.Start, cfg)
	for _, run := range s.Runs {
		if run.Last < p.next() {
			continue
		}
		for p.next() < run.First {
			p.recs = append(p.recs, record{})
		}
		st := run.State
		if st == Acquired {
			st = Available
		}
		for off := max(run.First, p.next()); off <= run.Last; off++ {
			p.recs = append(p.recs, record{state: st, deliveries: run.Deliveries})
		}
	}
	p.advance()
	return p
}
