package txncoord

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model/txnstate"
)

// Resume finishes a Prepare* entry found at start (R-TXN-3: the new owner
// sends its markers, R-MRK-1), with nobody to answer.
func (t *Txn) Resume(now time.Time) Step {
	if t.op != nil || !t.entry.State.IsPrepare() {
		return Step{}
	}
	o := &op{kind: opResume}
	t.op = o
	return t.startMarkers(o, t.entry.State == txnstate.PrepareCommit, now)
}

// startMarkers starts a round (R-MRK-1): one COMMIT or ABORT marker to
// every data partition of the (Prepare*) entry and one for the pending
// offsets of its groups, then Complete*.
func (t *Txn) startMarkers(o *op, commit bool, now time.Time) Step {
	t.round++
	o.commit, o.pending = commit, map[MarkerKey]bool{}
	var markers []Marker
	add := func(k MarkerKey) {
		o.pending[k] = true
		markers = append(markers, t.marker(o, k))
	}
	for _, tp := range t.entry.Partitions {
		if tp.Topic != OffsetsTopic {
			add(MarkerKey{TP: tp})
		}
	}
	if len(t.entry.Groups) > 0 || len(offsetsSlots(t.entry)) > 0 {
		add(MarkerKey{Groups: true})
	}
	if len(markers) == 0 {
		return t.complete(o, now)
	}
	return Step{Markers: markers}
}

func (t *Txn) marker(o *op, k MarkerKey) Marker {
	m := Marker{Round: t.round, Key: k, ProducerID: t.entry.ProducerID, Epoch: t.entry.Epoch, Commit: o.commit}
	if k.Groups {
		m.Groups, m.Slots = t.entry.Groups, offsetsSlots(t.entry)
	}
	return m
}

// offsetsSlots are the offsets slots in the transaction: AddOffsetsToTxn's
// (with their groups), and those a peer group coordinator added for a TV2
// TxnOffsetCommit, which names the __consumer_offsets partition alone
// (R-TV2-6).
func offsetsSlots(e txnstate.Entry) []int32 {
	var out []int32
	for _, tp := range e.Partitions {
		if tp.Topic == OffsetsTopic {
			out = append(out, tp.Partition)
		}
	}
	return out
}

// MarkerDone reports a marker's answer: NONE, UNSUPPORTED_FOR_MESSAGE_FORMAT
// and UNSUPPORTED_VERSION settle it (R-MRK-1), INVALID_PRODUCER_EPOCH and
// TRANSACTION_COORDINATOR_FENCED too (R-MRK-2: permanent; Apache would
// stall until a reload, U-4); anything else is sent again after
// MarkerRetryBackoff. The last settled marker writes Complete*.
func (t *Txn) MarkerDone(round int, k MarkerKey, code int16, now time.Time) Step {
	o := t.op
	if o == nil || round != t.round || !o.pending[k] {
		return Step{}
	}
	switch code {
	case 0, kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
	case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
		t.log.Warn("transaction marker refused; settling the partition", "transactional_id", t.id,
			"topic", k.TP.Topic, "partition", k.TP.Partition, "error", kerr.ErrorForCode(code))
	default:
		t.log.Warn("transaction marker failed; retrying", "transactional_id", t.id,
			"topic", k.TP.Topic, "partition", k.TP.Partition, "error", kerr.ErrorForCode(code))
		return Step{Later: &Later{After: MarkerRetryBackoff, Tick: Tick{Round: round, Key: k}}}
	}
	delete(o.pending, k)
	if len(o.pending) == 0 {
		return t.complete(o, now)
	}
	return Step{}
}

// Fire is a callback the machine asked for (Step.Later): a marker to send
// again.
func (t *Txn) Fire(k Tick, now time.Time) Step {
	if k.Rewrite {
		return t.rewrite()
	}
	if k.Complete {
		t.completeArmed = false
		return t.writeComplete()
	}
	o := t.op
	if o == nil || k.Round != t.round || o.pending == nil || o.persisting || !o.pending[k.Key] {
		return Step{}
	}
	return Step{Markers: []Marker{t.marker(o, k.Key)}}
}

// complete ends the transition once every marker is settled (R-MRK-1):
// the entry becomes Complete*, and nothing waits for it to be written.
// Every marker is durable, so the outcome is already durable: should the
// Complete* record be lost, the durable entry is still Prepare* and the
// next owner (or restart) sends its markers again (R-TXN-3; a marker
// written twice changes nothing), and any later transition writes a
// whole entry after it in the same slot log, so whatever the client does
// next is never durable without it. The answer goes out now, and the
// next request is not held back behind a write.
//
// Nor is it written at once: the producer's next transition (the next
// transaction's first add, usually within a millisecond) writes a whole
// entry that covers it, so it is written on its own only if none has
// within CompleteDelay (writeComplete). Written at once, it cost every
// transaction a record, its encoding and two hand-offs to and from the
// state writer (~12% of a transaction's CPU with --flush-interval-ms,
// measured with it never written). Until then the durable entry (which
// describe and list answer from) still says Prepare*, as it did while
// the write waited for its fsync.
func (t *Txn) complete(o *op, now time.Time) Step {
	next := t.entry.Clone()
	next.State = txnstate.CompleteAbort
	ev := Aborted
	if t.entry.State == txnstate.PrepareCommit {
		next.State, ev = txnstate.CompleteCommit, Committed
	}
	next.Partitions, next.Groups = nil, nil
	if next.NextProducerID != 0 {
		// R-TV2-3: the rotation a TV2 end prepared. The markers went out
		// at (old id, 32767); the client goes on at (new id, 0), and a
		// retry of the end names the old id at 32766 (LastEpoch).
		next.LastProducerID, next.ProducerID, next.Epoch, next.NextProducerID = next.ProducerID, next.NextProducerID, 0, 0
	}
	next.LastUpdateMs = now.UnixMilli()
	t.entry, t.persisted = next, true
	t.op = nil
	t.completeDue = true
	if o.answer != nil && o.kind == opEnd && o.bump != nil {
		// A TV2 end (the one kind of end that bumps): EndTxn v5 carries
		// the producer id and epoch to go on with.
		o.answer.ProducerID, o.answer.Epoch = next.ProducerID, next.Epoch
	}
	s := Step{Answer: o.answer, Events: []Event{ev}}
	if !t.completeArmed {
		t.completeArmed = true
		s.Later = &Later{After: CompleteDelay, Tick: Tick{Complete: true}}
	}
	if f := o.endFence; f != nil && o.endFenced {
		s.EndFenceDrop = f // every marker is durable and fences the ended epoch
	}
	return s
}

// writeComplete writes the Complete* entry complete left due, unless a
// later transition's write covered it; while one is in flight it looks
// again after CompleteDelay (that write may fail).
func (t *Txn) writeComplete() Step {
	if !t.completeDue {
		return Step{}
	}
	if t.op != nil {
		t.completeArmed = true
		return Step{Later: &Later{After: CompleteDelay, Tick: Tick{Complete: true}}}
	}
	t.completeDue = false
	t.unconfirmed++
	e := t.entry
	return Step{Persist: &e, Unconfirmed: true}
}

// CompleteDue is the Complete* entry not written yet, if there is one:
// for an owner that stops before the Tick comes (its write is then
// best effort; without it the Prepare* entry's markers are sent again).
func (t *Txn) CompleteDue() (txnstate.Entry, bool) { return t.entry, t.completeDue }

// UnconfirmedDone reports the outcome of a Step.Unconfirmed write (a
// Complete*). A failure of the log changes nothing in memory: the slot's
// log is offline, so the next transition's write fails too (and is
// answered so); a restart resumes the durable Prepare* entry's markers. A
// refused write (ErrRefused: a lease in doubt, the log intact) is written
// again after RewriteBackoff while it is still the entry: else, once the
// lease is certainly alive again and no later transition comes, the
// durable entry — which ListTransactions and DescribeTransactions answer
// from — says Prepare* for ever (a chaos run's hanging PrepareCommit).
func (t *Txn) UnconfirmedDone(err error) Step {
	if err == nil || !errors.Is(err, ErrRefused) {
		t.unconfirmed--
		if err != nil {
			t.log.Warn("writing Complete* failed; its markers are durable and are sent again after a restart",
				"transactional_id", t.id, "state", t.entry.State.String(), "err", err)
		}
		return Step{}
	}
	// Still counted unconfirmed (not Stable) until the rewrite is done.
	return Step{Later: &Later{After: RewriteBackoff, Tick: Tick{Rewrite: true}}}
}

// rewrite writes the Complete* entry again, unless a later transition
// has started (its own write carries a whole entry).
func (t *Txn) rewrite() Step {
	if t.op != nil || !t.entry.State.IsComplete() {
		t.unconfirmed--
		return Step{}
	}
	e := t.entry
	return Step{Persist: &e, Unconfirmed: true}
}
