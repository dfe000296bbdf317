package sharepartition

import "time"

// Batch is one record batch of the log, as read for an acquisition.
type Batch struct {
	First, Last int64
	// Aborted marks data of an aborted transaction for a read_committed
	// group: it is archived at once and never delivered (Apache's
	// maybeFilterAbortedTransactionalAcquiredRecords).
	Aborted bool
}

// Range is one run of offsets handed to a member with one delivery
// count (a ShareFetch AcquiredRecords entry): one per in-flight entry
// acquired.
type Range struct {
	First, Last int64
	Deliveries  int16
}

// Mode is how strictly a fetch's MaxRecords binds (ShareFetch v2's
// ShareAcquireMode, KIP-1206; the consumer's share.acquire.mode).
type Mode int8

// The acquire modes, as the wire numbers them.
const (
	// BatchOptimized (batch_optimized, the default) hands out whole log
	// batches: MaxRecords is reached by the batch that crosses it, so a
	// fetch may get more. New records become in-flight entries of about
	// BatchSize records, split at batch boundaries.
	BatchOptimized Mode = 0
	// RecordLimit (record_limit) hands out MaxRecords at most, cutting a
	// batch if need be.
	RecordLimit Mode = 1
)

// Want is what one fetch asks of a share-partition.
type Want struct {
	MaxRecords int
	// BatchSize is the records per in-flight entry of new records in
	// BatchOptimized mode (ShareFetch v1's BatchSize); 0 is MaxRecords.
	BatchSize int
	Mode      Mode
}

// Acquire hands member records, as Apache's SharePartition.acquire:
// first the Available ones inside the window (released or expired), then
// new ones from batches, which are the log's batches read from
// FetchOffset on, in order and below the high watermark (the last stable
// offset for read_committed). Only records the batches cover are handed
// out, so a member never gets an offset without its bytes.
//
// The records acquired are at most want.MaxRecords and the room left in
// the window (MaxRecordLocks), except that in BatchOptimized mode an
// entry or a log batch is taken whole: the one that reaches the limit
// may pass it. With the window full, only records inside it go out.
// An Available entry the read covers whole is acquired whole; one it
// covers in part is split. Offsets between batches (compacted away) enter
// the window archived, and so do aborted batches. Records enter their
// lock for LockDuration from now and their delivery count goes up by one;
// an entry already delivered DeliveryLimit times (the limit was lowered)
// is archived instead.
func (p *Partition) Acquire(member string, batches []Batch, want Want, now time.Time) []Range {
	p.Expire(now)
	if len(batches) == 0 || want.MaxRecords <= 0 {
		return nil
	}
	lo, hi := max(batches[0].First, p.start), batches[len(batches)-1].Last
	limit := min(want.MaxRecords, p.Room())
	if limit <= 0 {
		// Full (Apache's lastOffsetAndMaxRecordsToAcquire): only what is
		// inside the window may go out again.
		from := p.FetchOffset(now)
		if from > p.End() {
			return nil
		}
		limit = min(want.MaxRecords, int(p.End()-from+1))
		hi = min(hi, p.End())
	}
	var out []Range
	count := 0
	for i := p.find(lo); i < len(p.runs) && count < limit; i++ {
		r := &p.runs[i]
		if r.first > hi {
			break
		}
		if r.state != Available {
			continue
		}
		if r.deliveries >= p.cfg.DeliveryLimit {
			p.finish(r, Archived) // a limit lowered since the release, as Apache
			continue
		}
		first, last := max(r.first, lo), min(r.last, hi)
		if want.Mode == RecordLimit {
			last = min(last, first+int64(limit-count)-1)
		}
		if first != r.first || last != r.last {
			i, _ = p.isolate(first, last)
			r = &p.runs[i]
		}
		p.take(r, member, now)
		count += int(r.len())
		out = append(out, Range{First: r.first, Last: r.last, Deliveries: r.deliveries})
	}
	size := int64(want.BatchSize)
	if size <= 0 {
		size = int64(want.MaxRecords)
	}
	grow := -1 // the entry new records join, while it is under size
	for _, b := range batches {
		if count >= limit || b.First > hi {
			break
		}
		if b.Last < p.next {
			continue // already in the window
		}
		if p.next > hi {
			break // the window is full: nothing past it
		}
		if b.First > p.next {
			p.appendRun(run{first: p.next, last: b.First - 1, state: Archived}) // a gap: no record there
			grow = -1
		}
		first, last := max(b.First, p.next), min(b.Last, hi)
		if b.Aborted {
			p.appendRun(run{first: first, last: last, state: Archived})
			p.stats.Archived += uint64(last - first + 1)
			grow = -1
			continue
		}
		if want.Mode == RecordLimit {
			last = min(last, first+int64(limit-count)-1)
		}
		n := last - first + 1
		count += int(n)
		p.stats.Acquired += uint64(n)
		if grow >= 0 && (want.Mode == RecordLimit || p.runs[grow].len() < size) {
			p.runs[grow].last, p.next = last, last+1
			out[len(out)-1].Last = last
			continue
		}
		p.appendRun(run{first: first, last: last, state: Acquired, deliveries: 1, member: member, deadline: now.Add(p.cfg.LockDuration)})
		grow = len(p.runs) - 1
		out = append(out, Range{First: first, Last: last, Deliveries: 1})
	}
	p.advance()
	return out
}

// take acquires a whole Available run for member.
func (p *Partition) take(r *run, member string, now time.Time) {
	r.state, r.member, r.deadline = Acquired, member, now.Add(p.cfg.LockDuration)
	r.deliveries++
	p.lock(r)
	n := uint64(r.len())
	p.stats.Acquired += n
	if r.deliveries > 1 {
		p.stats.Redelivered += n
	}
}
