package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model/txnstate"
)

// fenceAbort is R-IPI-10 steps 1–3 and 5 (rejoin while Ongoing) and
// R-TXN-9 (timeout): PrepareAbort at a bumped epoch, fence it, ABORT
// markers at that epoch, CompleteAbort. A rejoin (to set) is answered
// CONCURRENT_TRANSACTIONS once every ABORT marker is durable (CompleteAbort
// is then written, see complete), or the fence's failure then; a failed PrepareAbort write is answered at once.
func (t *Txn) fenceAbort(to any, now time.Time) Step {
	f := t.entry.Epoch + 1
	if t.failedFence {
		f = t.fenceEpoch // R-IPI-14: reuse the epoch a failed fence left
	}
	next := t.entry.Clone()
	next.Epoch, next.LastEpoch, next.State = f, -1, txnstate.PrepareAbort
	reason := RejoinAbort
	if to == nil {
		reason = Reaper
	}
	o := &op{kind: opFenceAbort, to: to, fenceEpoch: f,
		bump: &Bump{ProducerID: t.entry.ProducerID, Epoch: f, PrevProducerID: t.entry.ProducerID, PrevEpoch: t.entry.Epoch, Reason: reason}}
	if to != nil {
		o.answer = errorAnswer(to, kerr.ConcurrentTransactions.Code)
	}
	return t.begin(o, next, now)
}

// prepared continues a transition once its Prepare* write is done:
// opFenceAbort fences, opEnd sends the markers.
func (t *Txn) prepared(o *op, err error, now time.Time) Step {
	if err != nil {
		t.op = nil
		if o.kind == opFenceAbort {
			// R-IPI-14: the old producer already counts as fenced.
			t.failedFence, t.fenceEpoch = true, o.fenceEpoch
		}
		s := t.answerOp(o, kerr.CoordinatorNotAvailable.Code)
		s.EndFenceDrop = o.endFence // the end did not happen (peers keep theirs: harmless, R-TV2-7)
		return s
	}
	t.durable(o)
	if o.kind == opFenceAbort {
		t.failedFence = false
		o.fencing = true
		return Step{Fence: &Fence{ProducerID: t.entry.ProducerID, Epoch: o.fenceEpoch}, Events: []Event{EpochBump}, Bump: o.bump}
	}
	var early *Answer
	if o.endFenced {
		// R-TV2-7: fenced everywhere and durable; the markers follow.
		early = t.answerEarly(o)
	}
	s := t.startMarkers(o, o.commit, now)
	// A TV2 end's bump (R-TV2-2) counts once its Prepare* is durable.
	s.Events, s.Bump = append(o.events, s.Events...), o.bump
	if early != nil {
		s.Answer = early
		s.Events = append(s.Events, EarlyEnd)
	}
	return s
}

// Overdue reports an Ongoing entry past its transaction timeout (R-TXN-9).
func Overdue(e txnstate.Entry, now time.Time) bool {
	return e.State == txnstate.Ongoing && e.TxnStartMs+int64(e.TimeoutMs) < now.UnixMilli()
}

// Reap is the timeout reaper's look at this entry (R-TXN-9): an Ongoing
// transaction past its timeout, with nothing in flight, is aborted as a
// rejoin would abort it, without anyone to answer.
func (t *Txn) Reap(now time.Time) Step {
	e := &t.entry
	if t.op != nil || !Overdue(*e, now) {
		return Step{}
	}
	t.log.Info("aborting a transaction past its timeout", "transactional_id", t.id,
		"producer_id", e.ProducerID, "epoch", e.Epoch, "timeout_ms", e.TimeoutMs)
	s := t.fenceAbort(nil, now)
	s.Events = append(s.Events, ReaperAbort)
	return s
}

// Expired reports an entry the expiry sweep deletes (R-IPI-15): Empty or
// Complete*, last updated at least expiration ago.
func Expired(e txnstate.Entry, now time.Time, expiration time.Duration) bool {
	return (e.State == txnstate.Empty || e.State.IsComplete()) && e.LastUpdateMs <= now.Add(-expiration).UnixMilli()
}

// Expire is R-IPI-15 for this entry: if it has expired and nothing is in
// flight, it is deleted (Step.Delete); afterwards the id has no entry and
// the next InitProducerId starts afresh (R-IPI-6). Requests meanwhile
// wait (Persisting).
func (t *Txn) Expire(now time.Time, expiration time.Duration) Step {
	if t.op != nil || !t.persisted || !Expired(t.entry, now, expiration) {
		return Step{}
	}
	t.log.Info("expiring transactional id", "transactional_id", t.id)
	t.op = &op{kind: opExpire, persisting: true}
	return Step{Delete: true}
}
