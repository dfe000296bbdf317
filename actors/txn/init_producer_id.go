package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/txnlog"
)

// exhausted is R-IPI: an epoch at or above int16 max − 1; 32767 is kept
// back for fencing.
func exhausted(epoch int16) bool { return epoch >= 32766 }

// initProducerID is R-IPI-6..13 (steps 7–10 of R-IPI-1; the handler did
// steps 1–6).
func (a *txnActor) initProducerID(m *messages.InitProducerID) {
	if !a.persisted && a.entry.TransactionalID == "" {
		// R-IPI-6: a fresh id starts from ⟨M,-1,M,-1,Empty⟩ in memory.
		pid, err := a.c.cfg.PIDs.Next()
		if err != nil {
			a.c.log.Error("allocating a producer id", "err", err)
			m.Reply(kerr.CoordinatorLoadInProgress.Code, -1, -1)
			return
		}
		a.entry = txnlog.Entry{TransactionalID: a.id, ProducerID: pid, Epoch: -1, LastProducerID: pid, LastEpoch: -1, State: txnlog.Empty, TxnStartMs: -1}
	}
	if a.inflight {
		m.Reply(kerr.ConcurrentTransactions.Code, -1, -1)
		return
	}
	e := &a.entry
	if m.HasClaim && !(e.Epoch == -1 || m.ProducerID == e.ProducerID || (m.ProducerID == e.LastProducerID && exhausted(m.ProducerEpoch))) {
		m.Reply(kerr.ProducerFenced.Code, -1, -1) // R-IPI-8
		return
	}
	switch {
	case e.State.IsPrepare() || e.State == txnlog.Dead:
		m.Reply(kerr.ConcurrentTransactions.Code, -1, -1) // R-IPI-9
	case e.State == txnlog.Ongoing:
		// R-IPI-10: abort the in-flight transaction at a bumped, fenced
		// epoch; the retry then bumps again onto a clean entry.
		a.c.log.Info("producer rejoined mid-transaction; aborting it", "transactional_id", a.id, "producer_id", e.ProducerID, "epoch", e.Epoch)
		a.fenceAbort(func(code int16) {
			if code == 0 {
				code = kerr.ConcurrentTransactions.Code
			}
			m.Reply(code, -1, -1)
		})
	default:
		a.bump(m)
	}
}

// bump is R-IPI-11 (same producer id, next epoch) and R-IPI-12 (rotation to
// a fresh producer id once the epoch is exhausted).
func (a *txnActor) bump(m *messages.InitProducerID) {
	e := a.entry
	next := e.Clone()
	rotated, retry := false, false
	if exhausted(e.Epoch) {
		if m.HasClaim && m.ProducerEpoch != e.Epoch {
			m.Reply(kerr.UnknownServerError.Code, -1, -1) // U-3, Apache's IllegalStateException
			return
		}
		pid, err := a.c.cfg.PIDs.Next()
		if err != nil {
			a.c.log.Error("allocating a producer id for rotation", "err", err)
			m.Reply(kerr.CoordinatorNotAvailable.Code, -1, -1)
			return
		}
		next.ProducerID, next.Epoch, next.LastProducerID = pid, 0, e.ProducerID
		next.LastEpoch = -1
		if m.HasClaim {
			next.LastEpoch = e.Epoch
		}
		rotated = true
	} else {
		switch {
		case !m.HasClaim:
			next.Epoch, next.LastEpoch = e.Epoch+1, -1
		case m.ProducerEpoch == e.Epoch || e.Epoch == -1:
			next.Epoch, next.LastEpoch = e.Epoch+1, e.Epoch
		case m.ProducerEpoch == e.LastEpoch:
			retry = true // a retried bump: the current epoch again
		default:
			m.Reply(kerr.ProducerFenced.Code, -1, -1)
			return
		}
		next.LastProducerID = e.ProducerID
	}
	next.State, next.Partitions, next.Groups = txnlog.Empty, nil, nil
	next.TxnStartMs, next.TimeoutMs = -1, m.TimeoutMs
	pid, epoch := next.ProducerID, next.Epoch
	// R-IPI-13: every bump to epoch > 0, retry included, is fenced here and
	// in the fence file before the answer. The fence runs while the entry
	// is persisted: fencing an epoch a failed persist never hands out only
	// fences a producer that is already being replaced.
	fenced := make(chan error, 1)
	if epoch > 0 {
		a.c.cfg.Fencer.Fence(pid, epoch, func(err error) { fenced <- err })
	} else {
		fenced <- nil // a new producer id: nothing to fence (R-FEN-1)
	}
	if !a.persist(next) {
		a.awaitFence(fenced, func(error) { m.Reply(kerr.CoordinatorNotAvailable.Code, -1, -1) })
		return
	}
	switch {
	case rotated:
		a.c.cfg.Metrics.EpochRotations.Inc()
	case !retry && e.Epoch >= 0:
		a.c.cfg.Metrics.EpochBumps.Inc()
	}
	a.awaitFence(fenced, func(err error) {
		if err != nil {
			m.Reply(kerr.CoordinatorNotAvailable.Code, -1, -1)
			return
		}
		m.Reply(0, pid, epoch)
	})
}

// awaitFence continues with then once the fence started on fenced has
// finished, keeping the entry in flight meanwhile.
func (a *txnActor) awaitFence(fenced chan error, then func(error)) {
	select {
	case err := <-fenced:
		then(err)
		return
	default:
	}
	a.inflight = true
	self, sys := a.self, a.c.sys
	go func() {
		err := <-fenced
		sys.Send(self, fenceDone{err: err, then: func(err error) {
			a.inflight = false
			then(err)
		}})
	}()
}
