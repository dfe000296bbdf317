package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/storage/txnlog"
)

// EndTxn is EndTxn for this id once the handler has done R-TXN-7 step 1.
type EndTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
}

// EndTxn is R-TXN-7 steps 2–4. Ongoing writes Prepare*, sends the markers
// and answers once every marker is durable, as Complete* is written
// (answering after the markers conforms; Apache answers once Prepare* is
// durable). The client's next transaction then never meets a Prepare*
// entry, and its first write follows Complete* in the slot log.
func (t *Txn) EndTxn(to any, r EndTxn, now time.Time) Step {
	if code := t.checkProducer(r.ProducerID, r.ProducerEpoch); code != 0 {
		return answer(to, code)
	}
	if t.op != nil {
		return answer(to, kerr.ConcurrentTransactions.Code)
	}
	switch t.entry.State {
	case txnlog.Ongoing:
		next := t.entry.Clone()
		next.State = txnlog.PrepareAbort
		if r.Commit {
			next.State = txnlog.PrepareCommit
		}
		return t.begin(&op{kind: opEnd, to: to, commit: r.Commit, answer: &Answer{To: to}}, next, now)
	case txnlog.CompleteCommit:
		return answer(to, codeUnless(r.Commit, kerr.InvalidTxnState.Code)) // an idempotent retry
	case txnlog.CompleteAbort:
		return answer(to, codeUnless(!r.Commit, kerr.InvalidTxnState.Code))
	case txnlog.PrepareCommit:
		return answer(to, sameDirection(r.Commit))
	case txnlog.PrepareAbort:
		return answer(to, sameDirection(!r.Commit))
	default:
		return answer(to, kerr.InvalidTxnState.Code)
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
