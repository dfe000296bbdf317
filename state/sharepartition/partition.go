// Package sharepartition is the state of one share-partition (KIP-932):
// one share group's cooperative view of one topic partition. Many members
// fetch the same partition; each record they receive is acquired under a
// time lock and must be acknowledged one by one.
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
// Pure: no actor, no I/O, the clock is an argument. Every operation first
// expires the locks due at now, so an acknowledgement that arrives after
// its lock ran out is refused whether or not a timer fired in between.
package sharepartition

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

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

// Config is the share group's configuration this state obeys, with
// Apache's names and defaults (see Defaults).
type Config struct {
	// LockDuration is group.share.record.lock.duration.ms (30 s).
	LockDuration time.Duration
	// DeliveryLimit is group.share.delivery.count.limit (5): a record
	// delivered this many times is archived instead of made available.
	DeliveryLimit int16
	// MaxRecordLocks is group.share.partition.max.record.locks (2000):
	// the most records the window [SPSO, SPEO] may hold.
	MaxRecordLocks int
}

// Defaults is Apache 4.2's configuration.
func Defaults() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryLimit: 5, MaxRecordLocks: 2000}
}

type record struct {
	state      State
	deliveries int16
	member     string    // holder while Acquired
	deadline   time.Time // lock expiry while Acquired
}

// Partition is one share-partition's state.
type Partition struct {
	cfg   Config
	start int64    // SPSO
	recs  []record // recs[i] is offset start+i; start+len(recs) is the next offset to read from the log
	locks locks    // the Acquired records' deadlines, earliest first
	stats Stats
}

// Stats counts what happened to records, for metrics.
type Stats struct {
	Acquired    uint64 // acquisitions, first deliveries and redeliveries
	Redelivered uint64 // acquisitions with a delivery count above 1
	Archived    uint64 // records archived (rejected, gap, limit, aborted)
	Expired     uint64 // acquisition locks that ran out
	Accepted    uint64 // records acknowledged
	Released    uint64 // records released by their holder
}

// New starts a share-partition whose SPSO is start (chosen by
// share.auto.offset.reset: the log end or the log start).
func New(start int64, cfg Config) *Partition {
	return &Partition{cfg: cfg, start: start}
}

// SetConfig applies a new configuration; locks already granted keep their
// deadlines.
func (p *Partition) SetConfig(cfg Config) { p.cfg = cfg }

// Config is the configuration in force.
func (p *Partition) Config() Config { return p.cfg }

// Start is the SPSO.
func (p *Partition) Start() int64 { return p.start }

// End is the SPEO: the last offset in the window, start-1 if it is empty.
func (p *Partition) End() int64 { return p.start + int64(len(p.recs)) - 1 }

// next is the first offset never read into the window.
func (p *Partition) next() int64 { return p.start + int64(len(p.recs)) }

// Stats is what happened so far.
func (p *Partition) Stats() Stats { return p.stats }

// Batch is one record batch of the log, as read for an acquisition.
type Batch struct {
	First, Last int64
	// Aborted marks data of an aborted transaction for a read_committed
	// group: it is archived at once and never delivered (Apache's
	// maybeFilterAbortedTransactionalAcquiredRecords).
	Aborted bool
}

// Range is one run of offsets handed to a member with one delivery
// count (a ShareFetch AcquiredRecords entry).
type Range struct {
	First, Last int64
	Deliveries  int16
}

// FetchOffset is where the next acquisition wants log data from: the
// first Available record in the window, or the first offset past it.
func (p *Partition) FetchOffset(now time.Time) int64 {
	p.Expire(now)
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i)
		}
	}
	return p.next()
}

// Room is how many offsets past the window may be read into it now.
func (p *Partition) Room() int {
	return max(0, p.cfg.MaxRecordLocks-len(p.recs))
}

// Acquire hands member up to maxRecords records: first the Available
// ones inside the window (released or expired), then new ones from
// batches, which are the log's batches read from FetchOffset on, in order
// and below the high watermark (the last stable offset for
// read_committed). Only records the batches cover are handed out, so a
// member never gets an offset without its bytes.
// Offsets between batches (compacted away) enter the window archived;
// new offsets stop at the window bound. Records enter their lock for
// LockDuration from now and their delivery count goes up by one.
func (p *Partition) Acquire(member string, batches []Batch, maxRecords int, now time.Time) []Range {
	p.Expire(now)
	var out []Range
	take := func(off int64, r *record) {
		r.state, r.member, r.deadline = Acquired, member, now.Add(p.cfg.LockDuration)
		p.lock(off, r)
		r.deliveries++
		p.stats.Acquired++
		if r.deliveries > 1 {
			p.stats.Redelivered++
		}
		if n := len(out); n > 0 && out[n-1].Last == off-1 && out[n-1].Deliveries == r.deliveries {
			out[n-1].Last = off
			return
		}
		out = append(out, Range{First: off, Last: off, Deliveries: r.deliveries})
	}
	if len(batches) == 0 {
		return nil
	}
	lo, hi := batches[0].First, batches[len(batches)-1].Last
	count := 0
	for i := range p.recs {
		if count >= maxRecords || p.start+int64(i) > hi {
			break
		}
		if p.start+int64(i) < lo {
			continue
		}
		r := &p.recs[i]
		if r.state != Available {
			continue
		}
		if r.deliveries >= p.cfg.DeliveryLimit {
			// A limit lowered since the release: archive, as Apache does.
			r.state = Archived
			p.stats.Archived++
			continue
		}
		take(p.start+int64(i), r)
		count++
	}
	for _, b := range batches {
		if count >= maxRecords || p.Room() == 0 {
			break
		}
		if b.Last < p.next() {
			continue // already in the window
		}
		for p.next() < b.First && p.Room() > 0 {
			p.recs = append(p.recs, record{state: Archived}) // a gap: no record there
		}
		for off := max(b.First, p.next()); off <= b.Last && count < maxRecords && p.Room() > 0; off++ {
			if b.Aborted {
				p.recs = append(p.recs, record{state: Archived})
				p.stats.Archived++
				continue
			}
			p.recs = append(p.recs, record{})
			take(off, &p.recs[len(p.recs)-1])
			count++
		}
	}
	p.advance()
	return out
}

// AckType is an acknowledgement's kind, as the wire numbers it
// (Apache's AcknowledgeType; 0 is a gap: no record at that offset).
type AckType int8

// The acknowledgement types.
const (
	Gap     AckType = 0
	Accept  AckType = 1
	Release AckType = 2
	Reject  AckType = 3
	Renew   AckType = 4 // KIP-1222: extend the lock, keep the record
)

// AckBatch acknowledges [First, Last]: Types holds one type for the whole
// range or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []AckType
}

// Acknowledge applies member's acknowledgements for this partition, all
// or nothing. Batches must be ordered and disjoint, each with one type or
// one per offset, and reach no further than the window
// (INVALID_REQUEST); Renew only where allowRenew (ShareFetch/Acknowledge
// v2 with IsRenewAck). Every record named at or above the SPSO must be
// Acquired by member with its lock still running (INVALID_RECORD_STATE);
// offsets below the SPSO are done already and skipped. A release of a
// record at the delivery limit archives it.
func (p *Partition) Acknowledge(member string, batches []AckBatch, allowRenew bool, now time.Time) int16 {
	p.Expire(now)
	maxType := Reject
	if allowRenew {
		maxType = Renew
	}
	prev := int64(-1)
	for _, b := range batches {
		if b.First > b.Last || b.First <= prev || len(b.Types) == 0 ||
			(len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1) {
			return kerr.InvalidRequest.Code
		}
		for _, t := range b.Types {
			if t < Gap || t > maxType {
				return kerr.InvalidRequest.Code
			}
		}
		if b.Last >= p.next() {
			return kerr.InvalidRequest.Code // beyond anything delivered
		}
		prev = b.Last
		for off := max(b.First, p.start); off <= b.Last; off++ {
			r := &p.recs[off-p.start]
			if r.state != Acquired || r.member != member {
				return kerr.InvalidRecordState.Code
			}
		}
	}
	for _, b := range batches {
		for off := max(b.First, p.start); off <= b.Last; off++ {
			t := b.Types[0]
			if len(b.Types) > 1 {
				t = b.Types[off-b.First]
			}
			r := &p.recs[off-p.start]
			switch t {
			case Accept:
				*r = record{state: Acknowledged, deliveries: r.deliveries}
				p.stats.Accepted++
			case Release:
				p.stats.Released++
				p.release(r)
			case Reject, Gap:
				*r = record{state: Archived, deliveries: r.deliveries}
				p.stats.Archived++
			case Renew:
				r.deadline = now.Add(p.cfg.LockDuration)
				p.lock(off, r)
			}
		}
	}
	p.advance()
	return 0
}

// release makes an Acquired record Available again, or Archived once it
// has been delivered DeliveryLimit times.
func (p *Partition) release(r *record) {
	if r.deliveries >= p.cfg.DeliveryLimit {
		*r = record{state: Archived, deliveries: r.deliveries}
		p.stats.Archived++
		return
	}
	*r = record{state: Available, deliveries: r.deliveries}
}

// ReleaseMember releases every record member holds (it left the group,
// was fenced, or closed its share session) and reports how many.
func (p *Partition) ReleaseMember(member string, now time.Time) int {
	p.Expire(now)
	n := 0
	for i := range p.recs {
		if r := &p.recs[i]; r.state == Acquired && r.member == member {
			p.release(r)
			n++
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
		l, ok := p.top()
		if !ok || now.Before(l.deadline) {
			break
		}
		p.locks.pop()
		p.release(&p.recs[l.offset-p.start])
		n++
	}
	if n > 0 {
		p.stats.Expired += uint64(n)
		p.advance()
	}
	return n
}

// NextDeadline is the earliest lock deadline, for the owner's timer.
func (p *Partition) NextDeadline() (time.Time, bool) {
	l, ok := p.top()
	return l.deadline, ok
}

// advance moves the SPSO over the done records at the front.
func (p *Partition) advance() {
	i := 0
	for i < len(p.recs) && (p.recs[i].state == Acknowledged || p.recs[i].state == Archived) {
		i++
	}
	if i == 0 {
		return
	}
	p.start += int64(i)
	if i == len(p.recs) {
		p.recs, p.locks = nil, p.locks[:0] // let the array go; no lock is left

		return
	}
	p.recs = p.recs[i:]
}

// Reset moves the SPSO to offset and forgets the window (share group
// offset reset or alteration, allowed by Apache only while the group has
// no members; log truncation or a deleted record range below it).
func (p *Partition) Reset(offset int64) {
	p.start, p.recs, p.locks = offset, nil, nil
}

// Record is one in-flight record, for the inspector.
type Record struct {
	Offset     int64
	State      State
	Deliveries int16
	Member     string
	Deadline   time.Time
}

// InFlight lists the window's records that are not done, at most limit.
func (p *Partition) InFlight(limit int) []Record {
	var out []Record
	for i := range p.recs {
		if len(out) >= limit {
			break
		}
		r := p.recs[i]
		out = append(out, Record{Offset: p.start + int64(i), State: r.state, Deliveries: r.deliveries, Member: r.member, Deadline: r.deadline})
	}
	return out
}

// Counts is how many records of the window are in each state.
func (p *Partition) Counts() (available, acquired, done int) {
	for i := range p.recs {
		switch p.recs[i].state {
		case Available:
			available++
		case Acquired:
			acquired++
		default:
			done++
		}
	}
	return
}
