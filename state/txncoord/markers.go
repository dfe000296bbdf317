package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/storage/txnlog"
)

// Resume finishes a Prepare* entry found at start (R-TXN-3: the new owner
// sends its markers, R-MRK-1), with nobody to answer.
func (t *Txn) Resume(now time.Time) Step {
	if t.op != nil || !t.entry.State.IsPrepare() {
		return Step{}
	}
	o := &op{kind: opResume}
	t.op = o
	return t.startMarkers(o, t.entry.State == txnlog.PrepareCommit, now)
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
	if len(t.entry.Groups) > 0 {
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
		m.Groups = t.entry.Groups
	}
	return m
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
// again, or a Complete* write to try again.
func (t *Txn) Fire(k Tick, now time.Time) Step {
	o := t.op
	if o == nil || k.Round != t.round || o.pending == nil || o.persisting {
		return Step{}
	}
	if k.Complete {
		if len(o.pending) == 0 {
			return t.complete(o, now)
		}
		return Step{}
	}
	if !o.pending[k.Key] {
		return Step{}
	}
	return Step{Markers: []Marker{t.marker(o, k.Key)}}
}

// complete writes Complete* once every marker is settled (R-MRK-1).
func (t *Txn) complete(o *op, now time.Time) Step {
	next := t.entry.Clone()
	next.State = txnlog.CompleteAbort
	if t.entry.State == txnlog.PrepareCommit {
		next.State = txnlog.CompleteCommit
	}
	next.Partitions, next.Groups = nil, nil
	return t.begin(o, next, now)
}

// completed ends the transition once Complete* is written; a failed write
// is tried again later, the transition staying in flight.
func (t *Txn) completed(o *op, err error) Step {
	if err != nil {
		return Step{Later: &Later{After: CompleteRetryBackoff, Tick: Tick{Round: t.round, Complete: true}}}
	}
	t.durable(o)
	t.op = nil
	ev := Aborted
	if t.entry.State == txnlog.CompleteCommit {
		ev = Committed
	}
	return Step{Answer: o.answer, Events: []Event{ev}}
}
