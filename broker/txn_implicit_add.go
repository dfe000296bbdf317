package broker

// Transaction version 2's implicit add (R-TV2-5, R-TV2-6): a TV2 client
// sends no AddPartitionsToTxn and no AddOffsetsToTxn; a transactional
// Produce v12 to a partition not yet in its transaction, or a
// TxnOffsetCommit v5 for a group whose offsets partition is not, adds it
// at the transaction's coordinator first, as Apache's
// AddPartitionsToTxnManager does for its partition leaders and group
// coordinators: in-process when this broker coordinates the id, else
// AddPartitionsToTxn v5 (VerifyOnly false) to the peer that does.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/partition"
	"kaas/actors/txn"
	"kaas/messages"
	"kaas/model"
	"kaas/storage/partlog"
)

// addAtCoordinator is R-TV2-5 for a batch the partition actor answered
// partition.VerifyRemotely at marker generation gen: once the coordinator
// has the partition in the transaction the batch goes back to the actor
// marked verified at gen; a refusal answers it. m.Reply then runs once
// more, with the real answer. deadline (zero: none) is the Produce
// request's (produceDeadline): a coordinator here waits for a previous
// transaction's markers until then (R-TXN-2).
func (b *Broker) addAtCoordinator(h *partition.Handle, m *messages.Produce, tp model.TopicPartition, gen uint64, deadline time.Time) {
	hdr, err := partlog.ParseBatchHeader(m.Batch)
	if err != nil || m.TransactionalID == nil {
		m.Verified, m.VerifiedGen, m.VerifyCode = true, gen, kerr.NotEnoughReplicas.Code
		h.Produce(m)
		return
	}
	b.addToTxn(*m.TransactionalID, hdr.ProducerID, hdr.ProducerEpoch, tp, deadline, func(code int16) {
		// Back through the actor either way: the producer's later
		// batches to this partition are held until this one returns.
		m.Verified, m.VerifiedGen, m.VerifyCode = true, gen, code
		h.Produce(m)
	})
}

// addToTxn adds tp to the producer's TV2 transaction at its coordinator;
// done gets 0 or the produce error (a coordinator that cannot answer now
// is NOT_ENOUGH_REPLICAS, which producers retry; a fenced producer
// INVALID_PRODUCER_EPOCH). A peer coordinator is not told the deadline
// (AddPartitionsToTxn carries none): it waits its own --txn-marker-wait.
func (b *Broker) addToTxn(id string, pid int64, epoch int16, tp model.TopicPartition, deadline time.Time, done func(code int16)) {
	if txns := b.txnsFor(id); txns != nil {
		b.addLocally(txns, id, pid, epoch, tp, deadline, done)
		return
	}
	if b.peers == nil {
		done(kerr.NotEnoughReplicas.Code) // a single broker stopping: the producer retries
		return
	}
	b.peers.AddToTxn(id, pid, epoch, tp, done)
}

// addLocally is addToTxn at this broker's coordinator.
func (b *Broker) addLocally(txns *txn.Coordinator, id string, pid int64, epoch int16, tp model.TopicPartition, deadline time.Time, done func(code int16)) {
	txns.AddPartitions(id, &messages.AddPartitionsToTxn{
		ProducerID: pid, ProducerEpoch: epoch, Partitions: []model.TopicPartition{tp}, TV2: true, Deadline: deadline,
		Reply: func(code int16, per []int16) {
			if code == 0 && len(per) == 1 {
				code = per[0]
			}
			done(produceAddCode(code))
		},
	})
}

// produceDeadline is when a Produce request's timeout (timeout_ms, from
// its arrival) runs out; zero if it has none.
func produceDeadline(received time.Time, timeoutMs int32) time.Time {
	if timeoutMs <= 0 || received.IsZero() {
		return time.Time{}
	}
	return received.Add(time.Duration(timeoutMs) * time.Millisecond)
}

// produceAddCode maps the coordinator's answer onto what a produce
// carries (R-PV-8: never PRODUCER_FENCED).
func produceAddCode(code int16) int16 {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.ConcurrentTransactions.Code, kerr.UnknownServerError.Code:
		return kerr.NotEnoughReplicas.Code
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
