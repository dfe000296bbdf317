package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/model/txnstate"
)

// EndTxn is EndTxn for this id once the handler has done R-TXN-7 step 1.
// TV2 is a transaction version 2 client (EndTxn v5+, R-TV2-1).
type EndTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	TV2           bool
}

// EndTxn is R-TXN-7 steps 2–4 (R-TV2-2..4 for TV2). Ongoing writes
// Prepare*, sends the markers and answers once every marker is durable,
// as Complete* is written (answering after the markers conforms; Apache
// answers once Prepare* is durable). The client's next transaction then
// never meets a Prepare* entry, and its first write follows Complete* in
// the slot log.
func (t *Txn) EndTxn(to any, r EndTxn, now time.Time, pids PIDs) Step {
	if r.TV2 {
		return t.endTxnV2(to, r, now, pids)
	}
	if code := t.checkProducer(r.ProducerID, r.ProducerEpoch); code != 0 {
		return answer(to, code)
	}
	if t.op != nil {
		return answer(to, kerr.ConcurrentTransactions.Code)
	}
	switch t.entry.State {
	case txnstate.Ongoing:
		next := t.entry.Clone()
		next.State = txnstate.PrepareAbort
		if r.Commit {
			next.State = txnstate.PrepareCommit
		}
		return t.begin(&op{kind: opEnd, to: to, commit: r.Commit, answer: &Answer{To: to}}, next, now)
	case txnstate.CompleteCommit:
		return answer(to, codeUnless(r.Commit, kerr.InvalidTxnState.Code)) // an idempotent retry
	case txnstate.CompleteAbort:
		return answer(to, codeUnless(!r.Commit, kerr.InvalidTxnState.Code))
	case txnstate.PrepareCommit:
		return answer(to, sameDirection(r.Commit))
	case txnstate.PrepareAbort:
		return answer(to, sameDirection(!r.Commit))
	default:
		return answer(to, kerr.InvalidTxnState.Code)
	}
}

// endTxnV2 is Apache 4's EndTxn for a TV2 client (R-TV2-2..4): every end
// bumps the epoch (the markers carry the bumped epoch, so every partition
// of the transaction then refuses a late batch of it), an exhausted epoch
// rotates to a fresh producer id (R-IPI-12's rule), and since the epoch
// moved, a retry is recognised by the epoch one below the entry's (or,
// after a rotation, by the old producer id at 32766) and answered with
// the current producer id and epoch.
func (t *Txn) endTxnV2(to any, r EndTxn, now time.Time, pids PIDs) Step {
	if t.op != nil {
		// First, as Apache: a rotation's retry may name the producer id
		// only the transition in flight knows.
		return answer(to, kerr.ConcurrentTransactions.Code)
	}
	e := t.entry
	retryOnOverflow := t.persisted && r.ProducerID != e.ProducerID && r.ProducerID == e.LastProducerID &&
		r.ProducerEpoch == 32766 && e.Epoch == 0
	if !t.persisted || (r.ProducerID != e.ProducerID && !retryOnOverflow) {
		return answer(to, kerr.InvalidProducerIDMapping.Code)
	}
	retryOnBump := r.ProducerID == e.ProducerID && int(e.Epoch) == int(r.ProducerEpoch)+1
	var valid bool
	switch {
	case e.State.IsPrepare():
		valid = retryOnBump
	case e.State.IsComplete():
		valid = retryOnBump || retryOnOverflow || r.ProducerEpoch == e.Epoch
	default: // Ongoing, Empty, Dead
		valid = !retryOnOverflow && r.ProducerEpoch == t.clientEpoch()
	}
	if !valid {
		return answer(to, kerr.ProducerFenced.Code)
	}
	isRetry := retryOnBump || retryOnOverflow
	current := Step{Answer: &Answer{To: to, ProducerID: e.ProducerID, Epoch: e.Epoch}}
	switch e.State {
	case txnstate.Ongoing:
		return t.prepareV2(to, r.Commit, false, now, pids)
	case txnstate.CompleteCommit:
		switch {
		case r.Commit && isRetry:
			return current
		case r.Commit || isRetry:
			return answer(to, kerr.InvalidTxnState.Code)
		}
		return t.prepareV2(to, false, true, now, pids) // an abort with nothing added
	case txnstate.CompleteAbort:
		switch {
		case r.Commit:
			return answer(to, kerr.InvalidTxnState.Code)
		case isRetry:
			return current
		}
		return t.prepareV2(to, false, true, now, pids)
	case txnstate.Empty:
		if r.Commit {
			return answer(to, kerr.InvalidTxnState.Code)
		}
		return t.prepareV2(to, false, true, now, pids)
	case txnstate.PrepareCommit:
		return answer(to, sameDirection(r.Commit))
	case txnstate.PrepareAbort:
		return answer(to, sameDirection(!r.Commit))
	default:
		return answer(to, kerr.InvalidTxnState.Code)
	}
}

// prepareV2 writes Prepare* at the next epoch (R-TV2-2), with the fresh
// producer id Complete* takes up if the epoch is exhausted (R-TV2-3);
// empty is an abort of a transaction nothing was added to, which starts
// now.
func (t *Txn) prepareV2(to any, commit, empty bool, now time.Time, pids PIDs) Step {
	e := t.entry
	next := e.Clone()
	next.State = txnstate.PrepareAbort
	if commit {
		next.State = txnstate.PrepareCommit
	}
	next.Epoch, next.LastEpoch, next.TV = e.Epoch+1, e.Epoch, 2
	if empty {
		next.Partitions, next.Groups, next.TxnStartMs = nil, nil, now.UnixMilli()
	}
	bump := &Bump{ProducerID: e.ProducerID, Epoch: next.Epoch, PrevProducerID: e.ProducerID, PrevEpoch: e.Epoch, Reason: EndTxnBump}
	events := []Event{EpochBump}
	if exhausted(e.Epoch) {
		pid, err := pids.Next()
		if err != nil {
			t.log.Error("allocating a producer id for rotation", "transactional_id", t.id, "err", err)
			return answer(to, kerr.CoordinatorNotAvailable.Code)
		}
		next.NextProducerID = pid
		bump = &Bump{ProducerID: pid, Epoch: 0, PrevProducerID: e.ProducerID, PrevEpoch: e.Epoch, Reason: Rotation}
		events = []Event{EpochRotation}
	}
	o := &op{kind: opEnd, to: to, commit: commit, answer: &Answer{To: to}, events: events, bump: bump}
	s := t.begin(o, next, now)
	if data := dataPartitions(next); len(data) > 0 {
		// R-TV2-7: the ended epoch's late data is refused on every
		// partition of the transaction before EndTxn is answered, which
		// may then be as soon as Prepare* is durable.
		t.endFences++
		o.endFence = &EndFence{Seq: t.endFences, ProducerID: e.ProducerID, Epoch: next.Epoch, Partitions: data}
		o.endPending = true
		s.EndFence = o.endFence
	}
	return s
}

// dataPartitions are the entry's partitions that get a data marker.
func dataPartitions(e txnstate.Entry) []model.TopicPartition {
	var out []model.TopicPartition
	for _, tp := range e.Partitions {
		if tp.Topic != OffsetsTopic {
			out = append(out, tp)
		}
	}
	return out
}

// EndFenceDone reports the outcome of the end fence the Step with seq
// asked for. Acknowledged by every partition, and Prepare* durable,
// EndTxn is answered now (R-TV2-7); failed, it is answered after the
// markers, as a TV1 end is (R-TXN-7).
func (t *Txn) EndFenceDone(seq int, err error) Step {
	o := t.op
	if o == nil || o.endFence == nil || o.endFence.Seq != seq || !o.endPending {
		return Step{}
	}
	o.endPending = false
	if err != nil {
		t.log.Info("end fence not acknowledged everywhere; EndTxn is answered after the markers",
			"transactional_id", t.id, "producer_id", o.endFence.ProducerID, "epoch", o.endFence.Epoch, "err", err)
		return Step{Events: []Event{EndFenceFailed}}
	}
	o.endFenced = true
	if o.persisting || o.pending == nil {
		return Step{} // Prepare* not durable yet: prepared answers
	}
	return Step{Answer: t.answerEarly(o), Events: []Event{EarlyEnd}}
}

// answerEarly takes o's answer to send before the markers are done, with
// the producer id and epoch the Complete* entry will carry (R-TV2-2/3).
func (t *Txn) answerEarly(o *op) *Answer {
	ans := o.answer
	o.answer = nil
	if ans == nil {
		return nil
	}
	ans.ProducerID, ans.Epoch = t.entry.ProducerID, t.entry.Epoch
	if t.entry.NextProducerID != 0 {
		ans.ProducerID, ans.Epoch = t.entry.NextProducerID, 0
	}
	return ans
}

func codeUnless(ok bool, code int16) int16 {
	if ok {
		return 0
	}
	return code
}

// sameDirection: a Prepare* entry not in flight answers 51 to a retry in
// its own direction and 48 to the other (R-TXN-7 step 4).
func sameDirection(same bool) int16 {
	if same {
		return kerr.ConcurrentTransactions.Code
	}
	return kerr.InvalidTxnState.Code
}

// ResumeEndFence is the end fence of a Prepare* entry found at start
// (R-TV2-7): a TV2 end (its epoch one above LastEpoch) may have been
// answered before the broker stopped, while its markers were not all
// written, and the floors that refused its late data were in memory only.
// Raised again before any partition takes a produce, they keep it refused
// until the resumed markers land. nil for any other entry.
func ResumeEndFence(e txnstate.Entry) *EndFence {
	if !e.State.IsPrepare() || e.TV != 2 || int(e.LastEpoch) != int(e.Epoch)-1 {
		return nil
	}
	data := dataPartitions(e)
	if len(data) == 0 {
		return nil
	}
	return &EndFence{ProducerID: e.ProducerID, Epoch: e.Epoch, Partitions: data}
}
