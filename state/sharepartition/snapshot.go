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

// Snapshot encodes the window as runs, adjacent entries that persist
// alike merged.
func (p *Partition) Snapshot() Snapshot {
	s := Snapshot{Start: p.start}
	for _, r := range p.runs {
		st := r.state
		if st == Acquired {
			st = Available
		}
		if n := len(s.Runs); n > 0 && s.Runs[n-1].State == st && s.Runs[n-1].Deliveries == r.deliveries {
			s.Runs[n-1].Last = r.last
			continue
		}
		s.Runs = append(s.Runs, Run{First: r.first, Last: r.last, State: st, Deliveries: r.deliveries})
	}
	return s
}

// Restore rebuilds a share-partition from a snapshot, one in-flight
// entry per run. Runs must be ordered, disjoint and at or above Start;
// holes between them are Available records never delivered.
func Restore(s Snapshot, cfg Config) *Partition {
	p := New(s.Start, cfg)
	for _, r := range s.Runs {
		if r.Last < p.next {
			continue
		}
		if p.next < r.First {
			p.appendRun(run{first: p.next, last: r.First - 1, state: Available})
		}
		st := r.State
		if st == Acquired {
			st = Available
		}
		p.appendRun(run{first: max(r.First, p.next), last: r.Last, state: st, deliveries: r.Deliveries})
	}
	p.advance()
	return p
}
