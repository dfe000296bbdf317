// Package sharepartition is the state of one share-partition (KIP-932):
// one share group's cooperative view of one topic partition. Many members
// fetch the same partition; each record they receive is acquired under a
// time lock and must be acknowledged.
//
// The window [SPSO, SPEO] holds every record in flight. Below the
// share-partition start offset (SPSO) every record is done (acknowledged
// or archived); past the share-partition end offset (SPEO) nothing has
// been fetched yet. Inside, each record is
//
//	Available ──acquire──▶ Acquired ──accept──▶ Acknowledged
//	    ▲                     │  └──reject/gap──▶ Archived
//	    └──release/lock expiry┘  (Archived instead once the
//	                              delivery count reaches the limit)
//
// as Apache's SharePartition. The SPSO moves up over done records; the
// number of records in the window is bounded (MaxRecordLocks, Apache's
// group.share.partition.max.record.locks): once full, only records inside
// it can be acquired again.
//
// The window is kept as in-flight entries (runs.go), as Apache keeps
// in-flight batches: a batch acquired whole is one entry with one state,
// holder, delivery count and lock, until an acknowledgement, release or
// renewal of part of it splits it. So a fetch of a log batch of thousands
// of records and its acknowledgement cost a few entries, not a record
// each (KIP-1206's batch-optimised acquisition, acquire.go).
//
// Pure: no actor, no I/O, the clock is an argument. Every operation first
// expires the locks due at now, so an acknowledgement that arrives after
// its lock ran out is refused whether or not a timer fired in between.
package sharepartition

import "time"

// State is a record's delivery state (Apache's RecordState; the numbers
// are Apache's persisted ones).
type State int8

// The record states.
const (
	Available    State = 0
	Acquired     State = 1
	Acknowledged State = 2
	Archived     State = 4
)

func (s State) String() string {
	switch s {
	case Available:
		return "Available"
	case Acquired:
		return "Acquired"
	case Acknowledged:
		return "Acknowledged"
	case Archived:
		return "Archived"
	}
	return "Unknown"
}

// done reports whether the state is terminal.
func (s State) done() bool { return s == Acknowledged || s == Archived }

// Config is the share group's configuration this state obeys, with
// Apache's names and defaults (see Defaults).
type Config struct {
	// LockDuration is group.share.record.lock.duration.ms (30 s).
	LockDuration time.Duration
	// DeliveryLimit is group.share.delivery.count.limit (5): a record
	// delivered this many times is archived instead of made available.
	DeliveryLimit int16
	// MaxRecordLocks is group.share.partition.max.record.locks (2000):
	// the most records the window [SPSO, SPEO] may hold (a batch
	// acquired whole may take it past, as Apache).
	MaxRecordLocks int
}

// Defaults is Apache 4.2's configuration.
func Defaults() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxRecordLocks: 2000}
}

// Partition is one share-partition's state.
type Partition struct {
	cfg   Config
	start int64 // SPSO
	// runs cover [start, next) without holes, in offset order (runs.go).
	runs  []run
	next  int64 // the first offset never read into the window
	locks locks // the Acquired runs' deadlines, earliest first
	stats Stats
}

// Stats counts what happened to records, for metrics.
type Stats struct {
	Acquired    uint64 // acquisitions, first deliveries and redeliveries
	Redelivered uint64 // acquisitions with a delivery count above 1
	Archived    uint64 // records archived (rejected, gap, limit, aborted)
	Expired     uint64 // records whose acquisition lock ran out
	Accepted    uint64 // records acknowledged
	Released    uint64 // records released by their holder
}

// New starts a share-partition whose SPSO is start (chosen by
// share.auto.offset.reset: the log end or the log start).
func New(start int64, cfg Config) *Partition {
	return &Partition{cfg: cfg, start: start, next: start}
}

// SetConfig applies a new configuration; locks already granted keep their
// deadlines.
func (p *Partition) SetConfig(cfg Config) { p.cfg = cfg }

// Config is the configuration in force.
func (p *Partition) Config() Config { return p.cfg }

// Start is the SPSO.
func (p *Partition) Start() int64 { return p.start }

// End is the SPEO: the last offset in the window, start-1 if it is empty.
func (p *Partition) End() int64 { return p.next - 1 }

// Stats is what happened so far.
func (p *Partition) Stats() Stats { return p.stats }

// FetchOffset is where the next acquisition wants log data from: the
// first Available record in the window, or the first offset past it.
func (p *Partition) FetchOffset(now time.Time) int64 {
	p.Expire(now)
	for i := range p.runs {
		if p.runs[i].state == Available {
			return p.runs[i].first
		}
	}
	return p.next
}

// Room is how many offsets past the window may be read into it now.
func (p *Partition) Room() int {
	return max(0, p.cfg.MaxRecordLocks-int(p.next-p.start))
}

// HeldUpBy reports whether member alone can make anything acquirable
// here: the window is full, nothing in it is Available, and its first
// records are Acquired by member, so the SPSO moves only with member's
// acknowledgement (or the lock running out). A fetch of member's that
// waits then waits mostly for itself: a client sends its
// acknowledgements on the connection the fetch holds (franz-go's share
// consumer from the same loop), behind it.
func (p *Partition) HeldUpBy(member string, now time.Time) bool {
	p.Expire(now)
	if p.Room() > 0 || len(p.runs) == 0 || p.runs[0].state != Acquired || p.runs[0].member != member {
		return false
	}
	for i := range p.runs {
		if p.runs[i].state == Available {
			return false
		}
	}
	return true
}

// release makes an Acquired run Available again, or Archived once it has
// been delivered DeliveryLimit times.
func (p *Partition) release(r *run) {
	if r.deliveries >= p.cfg.DeliveryLimit {
		p.finish(r, Archived)
		return
	}
	*r = run{first: r.first, last: r.last, state: Available, deliveries: r.deliveries}
}

// finish makes a run Acknowledged or Archived.
func (p *Partition) finish(r *run, st State) {
	if st == Archived {
		p.stats.Archived += uint64(r.len())
	}
	*r = run{first: r.first, last: r.last, state: st, deliveries: r.deliveries}
}

// ReleaseMember releases every record member holds (it left the group,
// was fenced, or closed its share session) and reports how many.
func (p *Partition) ReleaseMember(member string, now time.Time) int {
	p.Expire(now)
	n := 0
	for i := range p.runs {
		if r := &p.runs[i]; r.state == Acquired && r.member == member {
			n += int(r.len())
			p.release(r)
		}
	}
	p.advance()
	return n
}

// Expire releases the records whose lock ran out by now and reports how
// many.
func (p *Partition) Expire(now time.Time) int {
	n := 0
	for {
		l, i, ok := p.top()
		if !ok || now.Before(l.deadline) {
			break
		}
		p.locks.pop()
		n += int(p.runs[i].len())
		p.release(&p.runs[i])
	}
	if n > 0 {
		p.stats.Expired += uint64(n)
		p.advance()
	}
	return n
}

// NextDeadline is the earliest lock deadline, for the owner's timer.
func (p *Partition) NextDeadline() (time.Time, bool) {
	l, _, ok := p.top()
	return l.deadline, ok
}

// advance moves the SPSO over the done runs at the front.
func (p *Partition) advance() {
	i := 0
	for i < len(p.runs) && p.runs[i].state.done() {
		i++
	}
	if i == 0 {
		return
	}
	if i == len(p.runs) {
		p.start, p.runs, p.locks = p.next, nil, p.locks[:0] // let the array go; no lock is left
		return
	}
	p.start = p.runs[i].first
	p.runs = p.runs[i:]
}

// Reset moves the SPSO to offset and forgets the window (share group
// offset reset or alteration, allowed by Apache only while the group has
// no members; log truncation or a deleted record range below it).
func (p *Partition) Reset(offset int64) {
	p.start, p.next, p.runs, p.locks = offset, offset, nil, nil
}

// Record is one in-flight record, for the inspector.
type Record struct {
	Offset     int64
	State      State
	Deliveries int16
	Member     string
	Deadline   time.Time
}

// InFlight lists the window's records, at most limit.
func (p *Partition) InFlight(limit int) []Record {
	var out []Record
	for _, r := range p.runs {
		for off := r.first; off <= r.last; off++ {
			if len(out) >= limit {
				return out
			}
			out = append(out, Record{Offset: off, State: r.state, Deliveries: r.deliveries, Member: r.member, Deadline: r.deadline})
		}
	}
	return out
}

// Entries is how many in-flight entries hold the window (a batch acquired
// whole is one until it is split).
func (p *Partition) Entries() int { return len(p.runs) }

// Counts is how many records of the window are in each state.
func (p *Partition) Counts() (available, acquired, done int) {
	for _, r := range p.runs {
		switch r.state {
		case Available:
			available += int(r.len())
		case Acquired:
			acquired += int(r.len())
		default:
			done += int(r.len())
		}
	}
	return
}
