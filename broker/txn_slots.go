package broker

import (
	"path/filepath"
	"strconv"

	"kaas/storage/slots"
)

// coordinatorDataDir is where the transaction and group coordinator state
// lives: the data directory for a single broker. In cluster mode slot
// ownership (taking over one slot's file when its owner key moves) is not
// built yet, and two brokers must never write one slot file, so there each
// broker's coordinator keeps private, unused state under
// __cluster/unowned-broker-<id>/, answers NOT_COORDINATOR, and
// FindCoordinator answers COORDINATOR_NOT_AVAILABLE: cluster mode serves
// partitions (produce, fetch, offsets, topics) but not transactions or
// consumer groups yet.
func (b *Broker) coordinatorDataDir() string {
	if b.cluster == nil {
		return b.cfg.DataDir
	}
	return filepath.Join(b.cfg.DataDir, "__cluster", "unowned-broker-"+strconv.Itoa(int(b.cfg.BrokerID)))
}

// ownsTxnSlot reports whether this broker coordinates transactionalID's
// slot (R-CRD-3: the transactional APIs answer NOT_COORDINATOR otherwise).
// A single broker owns all 50 slots; only tests hand some to a peer.
func (b *Broker) ownsTxnSlot(transactionalID string) bool {
	if b.cluster != nil {
		return false
	}
	h := b.cfg.testHooks
	return h == nil || h.foreignSlot == nil || !h.foreignSlot(slots.Of(transactionalID))
}
