package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/state/txncoord"
)

// verifyTxnOffsetCommit is R-TXN-11: TxnOffsetCommit's check against the
// transaction coordinator (the group's offsets partition must be in the
// producer's ongoing transaction). In a cluster the transaction's slot
// may be a peer's: it is asked with AddPartitionsToTxn v4 (verify only)
// for the group's __consumer_offsets partition, as Apache's group
// coordinator asks, and a coordinator that cannot answer now gives a
// retriable code (NOT_ENOUGH_REPLICAS, which TxnOffsetCommit answers as
// COORDINATOR_NOT_AVAILABLE). Called from a blocking handler: it may wait
// for the peer.
func (b *Broker) verifyTxnOffsetCommit(transactionalID string, producerID int64, epoch int16, group string) int16 {
	if txns := b.txnsFor(transactionalID); txns != nil {
		return txns.VerifyTxnOffsetCommit(transactionalID, producerID, epoch, group)
	}
	if b.peers == nil {
		// A single broker stopping (or a test handing the slot away):
		// the producer finds the coordinator again.
		return kerr.NotCoordinator.Code
	}
	done := make(chan int16, 1)
	b.peers.VerifyTxn(transactionalID, producerID, epoch, txncoord.OffsetsPartition(group), func(code int16) { done <- code })
	code, _ := system.Await(context.Background(), done) // the peer client bounds it (peerTimeout)
	return code
}

// addTxnOffsetCommit is R-TV2-6: TxnOffsetCommit v5's implicit add of the
// group's offsets partition (and the group) to the producer's TV2
// transaction, AddOffsetsToTxn's effect. A peer coordinator gets
// AddPartitionsToTxn v5 naming the partition alone; its marker round
// then completes every group of that slot holding the producer's staged
// offsets. Answers as verifyTxnOffsetCommit. Called from a blocking
// handler.
func (b *Broker) addTxnOffsetCommit(transactionalID string, producerID int64, epoch int16, group string) int16 {
	done := make(chan int16, 1)
	if txns := b.txnsFor(transactionalID); txns != nil {
		txns.AddOffsets(transactionalID, &messages.AddOffsetsToTxn{ProducerID: producerID, ProducerEpoch: epoch, Group: group, TV2: true,
			Reply: func(code int16) { done <- code }})
		code, _ := system.Await(context.Background(), done) // the coordinator answers every request
		return code
	}
	if b.peers == nil {
		return kerr.NotCoordinator.Code
	}
	b.peers.AddToTxn(transactionalID, producerID, epoch, txncoord.OffsetsPartition(group), func(code int16) { done <- code })
	code, _ := system.Await(context.Background(), done) // the peer client bounds it (peerTimeout)
	return code
}
