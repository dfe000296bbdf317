package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/txnlog"
)

// endTxn is R-TXN-7 steps 2–4. Ongoing persists Prepare*, writes the
// markers and persists Complete* before answering (answering after the
// markers conforms, and the client's next transaction then never meets a
// Prepare* entry).
func (a *txnActor) endTxn(m *messages.EndTxn) {
	if code := a.checkProducer(m.ProducerID, m.ProducerEpoch); code != 0 {
		m.Reply(code)
		return
	}
	if a.inflight {
		m.Reply(kerr.ConcurrentTransactions.Code)
		return
	}
	e := &a.entry
	switch e.State {
	case txnlog.Ongoing:
		next := e.Clone()
		next.State = txnlog.PrepareAbort
		if m.Commit {
			next.State = txnlog.PrepareCommit
		}
		if !a.persist(next) {
			m.Reply(kerr.CoordinatorNotAvailable.Code)
			return
		}
		a.inflight = true
		a.writeMarkers(m.Commit, func() { m.Reply(0) })
	case txnlog.CompleteCommit:
		m.Reply(codeUnless(m.Commit, kerr.InvalidTxnState.Code))
	case txnlog.CompleteAbort:
		m.Reply(codeUnless(!m.Commit, kerr.InvalidTxnState.Code))
	case txnlog.PrepareCommit:
		m.Reply(sameDirection(m.Commit))
	case txnlog.PrepareAbort:
		m.Reply(sameDirection(!m.Commit))
	default:
		m.Reply(kerr.InvalidTxnState.Code)
	}
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
