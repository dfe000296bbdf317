package broker

import "kaas/storage/slots"

// ownsTxnSlot reports whether this broker coordinates transactionalID's
// slot (R-CRD-3: the transactional APIs answer NOT_COORDINATOR otherwise).
// A single broker owns all 50 slots; only tests hand some to a peer.
func (b *Broker) ownsTxnSlot(transactionalID string) bool {
	h := b.cfg.testHooks
	return h == nil || h.foreignSlot == nil || !h.foreignSlot(slots.Of(transactionalID))
}
