package sharepartition

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

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
//
// An acknowledgement of a whole in-flight entry changes the entry; one
// of a part of it, or with types that differ along it, splits it into the
// parts that now differ (Apache's switch of a batch to per-offset state).
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
		if b.Last >= p.next {
			return kerr.InvalidRequest.Code // beyond anything delivered
		}
		prev = b.Last
		for i := p.find(max(b.First, p.start)); i < len(p.runs) && p.runs[i].first <= b.Last; i++ {
			if r := &p.runs[i]; r.state != Acquired || r.member != member {
				return kerr.InvalidRecordState.Code
			}
		}
	}
	p.applyAcks(segments(batches, p.start), now)
	p.advance()
	return 0
}

// segment is offsets [first, last] acknowledged with one type.
type segment struct {
	first, last int64
	t           AckType
}

// segments flattens acknowledgement batches into ordered segments at or
// above start, one per run of equal types.
func segments(batches []AckBatch, start int64) []segment {
	var out []segment
	for _, b := range batches {
		if len(b.Types) == 1 {
			if first := max(b.First, start); first <= b.Last {
				out = append(out, segment{first: first, last: b.Last, t: b.Types[0]})
			}
			continue
		}
		for off := max(b.First, start); off <= b.Last; off++ {
			t := b.Types[off-b.First]
			if n := len(out); n > 0 && out[n-1].last == off-1 && out[n-1].t == t {
				out[n-1].last = off
				continue
			}
			out = append(out, segment{first: off, last: off, t: t})
		}
	}
	return out
}

// applyAcks rebuilds the runs in one pass with each segment's part
// changed: a run that a segment covers in part is split. The segments
// are validated (each lies on Acquired runs inside the window).
func (p *Partition) applyAcks(segs []segment, now time.Time) {
	if len(segs) == 0 {
		return
	}
	out := make([]run, 0, len(p.runs)+2*len(segs))
	var relock []int // indexes in out of Acquired runs that need a lock entry
	si := 0
	for _, r := range p.runs {
		moved := false // r.first is no longer the offset its lock entry names
		for r.first <= r.last {
			if si == len(segs) || segs[si].first > r.last {
				if moved && r.state == Acquired {
					relock = append(relock, len(out))
				}
				out = append(out, r)
				break
			}
			s := segs[si]
			if s.first > r.first {
				left := r
				left.last = s.first - 1
				if moved && left.state == Acquired {
					relock = append(relock, len(out))
				}
				out = append(out, left)
				r.first, moved = s.first, true
			}
			piece := r
			piece.last = min(s.last, r.last)
			if p.ackRun(&piece, s.t, now) {
				relock = append(relock, len(out))
			} else if moved && piece.state == Acquired {
				relock = append(relock, len(out))
			}
			out = append(out, piece)
			if piece.last == s.last {
				si++
			}
			r.first, moved = piece.last+1, true
		}
	}
	p.runs = out
	for _, i := range relock {
		p.lock(&p.runs[i])
	}
}

// ackRun applies one acknowledgement type to a whole Acquired run and
// reports whether it needs a new lock entry (a renewal).
func (p *Partition) ackRun(r *run, t AckType, now time.Time) bool {
	n := uint64(r.len())
	switch t {
	case Accept:
		p.finish(r, Acknowledged)
		p.stats.Accepted += n
	case Release:
		p.stats.Released += n
		p.release(r)
	case Reject, Gap:
		p.finish(r, Archived)
	case Renew:
		r.deadline = now.Add(p.cfg.LockDuration)
		return true
	}
	return false
}
