package txn

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/txnlog"
)

// markerKey names one marker of a round: a data partition, or (groups)
// the pending offsets of every group in the transaction.
type markerKey struct {
	tp     txnlog.TopicPartition
	groups bool
}

// markerRound is one Prepare* → Complete* pass (R-MRK-1). round tells
// stale callbacks from an earlier pass apart.
type markerRound struct {
	round   int
	commit  bool
	pending map[markerKey]bool
	then    func()
}

const markerRetryBackoff = 100 * time.Millisecond

// writeMarkers sends a COMMIT or ABORT marker to every partition of the
// (Prepare*) entry, then persists Complete* and calls then.
func (a *txnActor) writeMarkers(commit bool, then func()) {
	a.markers.round++
	r := &a.markers
	r.commit, r.then, r.pending = commit, then, map[markerKey]bool{}
	for _, tp := range a.entry.Partitions {
		if tp.Topic != OffsetsTopic {
			r.pending[markerKey{tp: tp}] = true
		}
	}
	if len(a.entry.Groups) > 0 {
		r.pending[markerKey{groups: true}] = true
	}
	if len(r.pending) == 0 {
		a.completeMarkers()
		return
	}
	for key := range r.pending {
		a.sendMarker(key)
	}
}

func (a *txnActor) sendMarker(key markerKey) {
	round, self, sys := a.markers.round, a.self, a.c.sys
	reply := func(code int16) { sys.Send(self, markerDone{round: round, key: key, code: code}) }
	e := &a.entry
	if key.groups {
		a.c.cfg.Markers.CompleteTxnOffsets(e.ProducerID, e.Epoch, a.markers.commit, e.Groups, reply)
		return
	}
	m := &messages.WriteMarker{
		ProducerID: e.ProducerID, ProducerEpoch: e.Epoch, Commit: a.markers.commit,
		CoordinatorEpoch: a.c.cfg.Store.CoordinatorEpoch(a.id), Reply: reply,
	}
	if !a.c.cfg.Markers.WriteMarker(key.tp, m) {
		// The topic was deleted: there is nothing left to mark.
		reply(0)
	}
}

func (a *txnActor) markerDone(m markerDone) {
	r := &a.markers
	if m.round != r.round || !r.pending[m.key] {
		return
	}
	switch m.code {
	case 0, kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
	case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
		// R-MRK-2: permanent; settle (Apache would stall until a reload).
		a.c.log.Warn("transaction marker refused; settling the partition", "transactional_id", a.id,
			"topic", m.key.tp.Topic, "partition", m.key.tp.Partition, "error", kerr.ErrorForCode(m.code))
	default:
		a.c.log.Warn("transaction marker failed; retrying", "transactional_id", a.id,
			"topic", m.key.tp.Topic, "partition", m.key.tp.Partition, "error", kerr.ErrorForCode(m.code))
		self, sys, round := a.self, a.c.sys, r.round
		time.AfterFunc(markerRetryBackoff, func() { sys.Send(self, retryMarker{round: round, key: m.key}) })
		return
	}
	delete(r.pending, m.key)
	if len(r.pending) == 0 {
		a.completeMarkers()
	}
}

func (a *txnActor) resendMarker(m retryMarker) {
	if m.round == a.markers.round && a.markers.pending[m.key] {
		a.sendMarker(m.key)
	}
}

// completeMarkers persists Complete* once every marker is settled.
func (a *txnActor) completeMarkers() {
	next := a.entry.Clone()
	commit := a.entry.State == txnlog.PrepareCommit
	next.State = txnlog.CompleteAbort
	if commit {
		next.State = txnlog.CompleteCommit
	}
	next.Partitions, next.Groups = nil, nil
	if !a.persist(next) {
		// Complete* must eventually be durable (R-TXN-3): try again.
		self, sys, round := a.self, a.c.sys, a.markers.round
		time.AfterFunc(time.Second, func() { sys.Send(self, retryComplete{round: round}) })
		return
	}
	if commit {
		a.c.cfg.Metrics.TxnCommits.Inc()
	} else {
		a.c.cfg.Metrics.TxnAborts.Inc()
	}
	a.inflight = false
	then := a.markers.then
	a.markers.then, a.markers.pending = nil, nil
	if then != nil {
		then()
	}
}
