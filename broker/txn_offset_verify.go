package broker

import "github.com/twmb/franz-go/pkg/kerr"

// verifyTxnOffsetCommit is R-TXN-11: TxnOffsetCommit's check against the
// transaction coordinator (the group's offsets partition must be in the
// producer's ongoing transaction).
func (b *Broker) verifyTxnOffsetCommit(transactionalID string, producerID int64, epoch int16, group string) int16 {
	txns := b.txnsFor(transactionalID)
	if txns == nil {
		// The coordinator unit (every slot) moved after the group's
		// check: the producer finds the new coordinator.
		return kerr.NotCoordinator.Code
	}
	return txns.VerifyTxnOffsetCommit(transactionalID, producerID, epoch, group)
}
