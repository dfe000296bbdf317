package broker

// verifyTxnOffsetCommit is R-TXN-11: TxnOffsetCommit's check against the
// transaction coordinator (the group's offsets partition must be in the
// producer's ongoing transaction).
func (b *Broker) verifyTxnOffsetCommit(transactionalID string, producerID int64, epoch int16, group string) int16 {
	return b.txns.VerifyTxnOffsetCommit(transactionalID, producerID, epoch, group)
}
