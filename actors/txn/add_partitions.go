package txn

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/slots"
	"kaas/storage/txnlog"
)

// addPartitions is R-TXN-4 steps 4–7, or R-TXN-5's VerifyOnly check.
func (a *txnActor) addPartitions(m *messages.AddPartitionsToTxn) {
	if code := a.checkProducer(m.ProducerID, m.ProducerEpoch); code != 0 {
		m.Reply(code, nil)
		return
	}
	if m.VerifyOnly {
		if a.entry.State.IsPrepare() {
			m.Reply(kerr.ConcurrentTransactions.Code, nil)
			return
		}
		codes := make([]int16, len(m.Partitions))
		for i, tp := range m.Partitions {
			if a.entry.State != txnlog.Ongoing || !a.entry.HasPartition(tp) {
				codes[i] = kerr.InvalidTxnState.Code
			}
		}
		m.Reply(0, codes)
		return
	}
	code := a.addToTxn(m.Partitions, "")
	if code != 0 {
		m.Reply(code, nil)
		return
	}
	m.Reply(0, make([]int16, len(m.Partitions)))
}

// addOffsets is R-TXN-6: the group's offsets partition joins the
// transaction.
func (a *txnActor) addOffsets(m *messages.AddOffsetsToTxn) {
	if code := a.checkProducer(m.ProducerID, m.ProducerEpoch); code != 0 {
		m.Reply(code)
		return
	}
	tp := txnlog.TopicPartition{Topic: OffsetsTopic, Partition: int32(slots.Of(m.Group))}
	m.Reply(a.addToTxn([]txnlog.TopicPartition{tp}, m.Group))
}

// addToTxn is R-TXN-4 steps 5–7 (after the producer check).
func (a *txnActor) addToTxn(tps []txnlog.TopicPartition, group string) int16 {
	e := &a.entry
	if a.inflight || e.State.IsPrepare() {
		return kerr.ConcurrentTransactions.Code
	}
	if e.State == txnlog.Dead {
		return kerr.InvalidTxnState.Code
	}
	merged, added := e.WithPartitions(tps)
	groups := e.Groups
	if group != "" {
		groups = e.WithGroup(group)
	}
	if e.State == txnlog.Ongoing && !added && len(groups) == len(e.Groups) {
		return 0 // step 6: nothing new, nothing persisted
	}
	next := e.Clone()
	if e.State != txnlog.Ongoing {
		next.TxnStartMs = a.now().UnixMilli()
	}
	next.State, next.Partitions, next.Groups = txnlog.Ongoing, merged, groups
	if !a.persist(next) {
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}
