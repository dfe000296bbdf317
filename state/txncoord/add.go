package txncoord

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/model/txnstate"
)

// AddPartitions is AddPartitionsToTxn for this id once the handler has
// done R-TXN-4 steps 1–3 (or R-TXN-5's request-level checks).
type AddPartitions struct {
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []model.TopicPartition
	// VerifyOnly is R-TXN-5's v4 check: report which partitions are in
	// the transaction, change nothing.
	VerifyOnly bool
	// TV2 is the implicit add of a TV2 client's Produce v12 or
	// TxnOffsetCommit v5 (R-TV2-5): the transaction is a TV2 one.
	TV2 bool
}

// AddPartitions is R-TXN-4 steps 4–7, or R-TXN-5's VerifyOnly check. The
// answer is a transaction-level code, or 0 and one code per partition.
func (t *Txn) AddPartitions(to any, r AddPartitions, now time.Time) Step {
	if code := t.checkProducer(r.ProducerID, r.ProducerEpoch); code != 0 {
		return answer(to, code)
	}
	if r.VerifyOnly {
		// In-flight transitions are ignored here (R-TXN-5).
		if t.entry.State.IsPrepare() {
			return answer(to, kerr.ConcurrentTransactions.Code)
		}
		codes := make([]int16, len(r.Partitions))
		for i, tp := range r.Partitions {
			if t.entry.State != txnstate.Ongoing || !t.entry.HasPartition(tp) {
				codes[i] = kerr.InvalidTxnState.Code
			}
		}
		return Step{Answer: &Answer{To: to, Partitions: codes}}
	}
	return t.addToTxn(to, r.Partitions, "", make([]int16, len(r.Partitions)), r.TV2, now)
}

// AddOffsets is AddOffsetsToTxn for this id once the handler has done
// R-TXN-6's ACL checks.
type AddOffsets struct {
	ProducerID    int64
	ProducerEpoch int16
	Group         string
	TV2           bool // TxnOffsetCommit v5's implicit add (R-TV2-6)
}

// AddOffsets is R-TXN-6: the group's offsets partition joins the
// transaction (R-TXN-4 steps 4–7 for that one partition).
func (t *Txn) AddOffsets(to any, r AddOffsets, now time.Time) Step {
	if code := t.checkProducer(r.ProducerID, r.ProducerEpoch); code != 0 {
		return answer(to, code)
	}
	return t.addToTxn(to, []model.TopicPartition{OffsetsPartition(r.Group)}, r.Group, nil, r.TV2, now)
}

// addToTxn is R-TXN-4 steps 5–7 (after the producer check); partitions is
// the success answer's per-partition codes.
func (t *Txn) addToTxn(to any, tps []model.TopicPartition, group string, partitions []int16, tv2 bool, now time.Time) Step {
	e := &t.entry
	if t.op != nil || e.State.IsPrepare() {
		return answer(to, kerr.ConcurrentTransactions.Code) // step 5
	}
	if e.State == txnstate.Dead {
		return answer(to, kerr.InvalidTxnState.Code)
	}
	ok := &Answer{To: to, Partitions: partitions}
	merged, added := e.WithPartitions(tps)
	groups := e.Groups
	if group != "" {
		groups = e.WithGroup(group)
	}
	if e.State == txnstate.Ongoing && !added && len(groups) == len(e.Groups) {
		return Step{Answer: ok} // step 6: nothing new, nothing persisted
	}
	next := e.Clone()
	if e.State != txnstate.Ongoing {
		next.TxnStartMs, next.TV = now.UnixMilli(), 0
	}
	if tv2 {
		next.TV = 2
	}
	next.State, next.Partitions, next.Groups = txnstate.Ongoing, merged, groups
	return t.begin(&op{kind: opAdd, to: to, answer: ok}, next, now) // step 7
}
