package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model/txnstate"
)

// InitProducerID is the transactional InitProducerId request once the
// handler has done R-IPI-1 steps 1–6 (ACL, claim shape, id, timeout,
// ownership).
type InitProducerID struct {
	TimeoutMs     int32
	HasClaim      bool // v3+ with a (ProducerID, ProducerEpoch) claim
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID is R-IPI-1 steps 7–10: R-IPI-6 (new entry), R-TXN-2 (in
// flight), R-IPI-8 (claim identity), then by state R-IPI-9 (Prepare*),
// R-IPI-10 (rejoin-abort) or R-IPI-11/12 (bump, rotation) with R-IPI-13's
// fence.
func (t *Txn) InitProducerID(to any, r InitProducerID, now time.Time, pids PIDs) Step {
	if !t.persisted && t.entry.TransactionalID == "" {
		// R-IPI-6: a fresh id starts from ⟨M,-1,M,-1,Empty⟩ in memory; if
		// its first write fails it stays so and is new to the next call.
		pid, err := pids.Next()
		if err != nil {
			t.log.Error("allocating a producer id", "transactional_id", t.id, "err", err)
			return answer(to, kerr.CoordinatorLoadInProgress.Code)
		}
		t.entry = txnstate.Entry{TransactionalID: t.id, ProducerID: pid, Epoch: -1, LastProducerID: pid, LastEpoch: -1, State: txnstate.Empty, TxnStartMs: -1}
	}
	if t.op != nil {
		return answer(to, kerr.ConcurrentTransactions.Code)
	}
	e := &t.entry
	if r.HasClaim && !(e.Epoch == -1 || r.ProducerID == e.ProducerID || (r.ProducerID == e.LastProducerID && exhausted(r.ProducerEpoch))) {
		return answer(to, kerr.ProducerFenced.Code) // R-IPI-8
	}
	switch {
	case e.State.IsPrepare() || e.State == txnstate.Dead:
		return answer(to, kerr.ConcurrentTransactions.Code) // R-IPI-9
	case e.State == txnstate.Ongoing:
		// R-IPI-10: abort the open transaction at a bumped, fenced epoch;
		// the retry then bumps again onto a clean entry.
		t.log.Info("producer rejoined mid-transaction; aborting it", "transactional_id", t.id, "producer_id", e.ProducerID, "epoch", e.Epoch)
		return t.fenceAbort(to, now)
	default:
		return t.bump(to, r, now, pids)
	}
}

// bump is R-IPI-11 (same producer id, next epoch) and R-IPI-12 (rotation
// to a fresh producer id once the epoch is exhausted).
func (t *Txn) bump(to any, r InitProducerID, now time.Time, pids PIDs) Step {
	e := t.entry
	next := e.Clone()
	var events []Event
	var bump *Bump
	if exhausted(e.Epoch) {
		if r.HasClaim && r.ProducerEpoch != e.Epoch {
			return answer(to, kerr.UnknownServerError.Code) // U-3, Apache's IllegalStateException
		}
		pid, err := pids.Next()
		if err != nil {
			t.log.Error("allocating a producer id for rotation", "transactional_id", t.id, "err", err)
			return answer(to, kerr.CoordinatorNotAvailable.Code)
		}
		next.ProducerID, next.Epoch, next.LastProducerID = pid, 0, e.ProducerID
		next.LastEpoch = -1
		if r.HasClaim {
			next.LastEpoch = e.Epoch
		}
		events = []Event{EpochRotation}
		bump = &Bump{ProducerID: pid, Epoch: 0, PrevProducerID: e.ProducerID, PrevEpoch: e.Epoch, Reason: Rotation}
	} else {
		switch {
		case !r.HasClaim:
			next.Epoch, next.LastEpoch = e.Epoch+1, -1
		case r.ProducerEpoch == e.Epoch || e.Epoch == -1:
			next.Epoch, next.LastEpoch = e.Epoch+1, e.Epoch
		case r.ProducerEpoch == e.LastEpoch:
			// A retried bump: the current epoch again, nothing to count.
		default:
			return answer(to, kerr.ProducerFenced.Code)
		}
		if next.Epoch != e.Epoch && e.Epoch >= 0 {
			events = []Event{EpochBump}
			bump = &Bump{ProducerID: e.ProducerID, Epoch: next.Epoch, PrevProducerID: e.ProducerID, PrevEpoch: e.Epoch, Reason: Rejoin}
		}
		next.LastProducerID = e.ProducerID
	}
	next.State, next.Partitions, next.Groups = txnstate.Empty, nil, nil
	next.TxnStartMs, next.TimeoutMs = -1, r.TimeoutMs
	o := &op{kind: opBump, to: to, events: events, bump: bump,
		answer: &Answer{To: to, ProducerID: next.ProducerID, Epoch: next.Epoch}}
	s := t.begin(o, next, now)
	// R-IPI-13: every answer with epoch > 0, retry included, is fenced
	// here and in the fence file first. The fence runs while the entry is
	// written: fencing an epoch a failed write never hands out only fences
	// a producer that is being replaced anyway.
	if next.Epoch > 0 {
		o.fencing = true
		s.Fence = &Fence{ProducerID: next.ProducerID, Epoch: next.Epoch}
	}
	return s
}

// finishBump answers once both the write and the fence are done: the new
// (pid, epoch), or COORDINATOR_NOT_AVAILABLE if either failed (a failed
// fence leaves the entry bumped; the client's retry repeats the
// idempotent fence, R-IPI-13).
func (t *Txn) finishBump() Step {
	o := t.op
	if o.persisting || o.fencing {
		return Step{}
	}
	t.op = nil
	if o.persistFailed || o.fenceFailed {
		return answer(o.to, kerr.CoordinatorNotAvailable.Code)
	}
	return Step{Answer: o.answer}
}
