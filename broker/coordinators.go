package broker

// The transaction and group coordinators with the stores behind them. A
// single broker opens every transaction-state and group-offsets slot at
// start and keeps them for its whole life. In a cluster the coordinators
// start with no slot open, and each slot is its own ownership unit
// (ownership.TxnSlotUnit, ownership.OffsetsSlotUnit), opened while this
// broker holds its owner key (cluster_slots.go), so no two brokers
// ever write one slot file. A broker that takes a slot over opens it from
// the shared volume as a restart does: the slot's coordinator epoch goes
// up (markers of the previous owner are fenced, R-MRK-3), every Prepare*
// transaction of it is finished and every Ongoing one gets its timeout
// back (txn.Coordinator.StartSlot), and its groups' offsets are loaded;
// members rejoin when their next request is answered NOT_COORDINATOR.

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/partition"
	"kaas/actors/txn"
	"kaas/actors/txnwriter"
	"kaas/model/slots"
	"kaas/model/txnstate"
	"kaas/storage/txnlog"
)

// coordinators is one opening of the coordinator state.
type coordinators struct {
	store  *txnlog.Store
	writer *txnwriter.Handle // the only writer of store
	txns   *txn.Coordinator
	groups *groupCoordinator
	// txnOwned and groupOwned are the slots served here: every one for a
	// single broker; in a cluster, those whose owner key this broker holds
	// and whose store is open (set after opening, cleared before closing).
	txnOwned   [slots.Count]atomic.Bool
	groupOwned [slots.Count]atomic.Bool
}

// openCoordinators opens the transaction store and the offsets logs
// (every slot for a single broker, none yet in a cluster), spawns both
// coordinators, publishes them and resumes unfinished transactions.
func (b *Broker) openCoordinators() error {
	all := b.cluster == nil
	var store *txnlog.Store
	var err error
	if all {
		store, err = txnlog.Open(b.env)
	} else {
		store, err = txnlog.NewStore(b.env)
	}
	if err != nil {
		return fmt.Errorf("opening transaction state: %w", err)
	}
	alive := func(n int) bool { return b.slotAlive(txnSlots, n) } // the lease gate
	writer, err := txnwriter.Start(b.sys, store, txnLogObserver{b.metrics}, b.log, alive, b.cfg.FlushInterval)
	if err != nil {
		_ = store.Close()
		return err
	}
	co := &coordinators{store: store, writer: writer}
	co.txns = txn.New(b.sys, txn.Config{
		Store:         writer,
		PIDs:          b.pids,
		Fencer:        b.fence,
		EndFencer:     endFencer{b},
		Markers:       markerWriter{b},
		AbortInterval: b.cfg.TxnAbortInterval,
		Expiration:    b.cfg.TransactionalIDExpiration,
		MarkerWait:    b.cfg.TxnMarkerWait,
		Owns:          func(n int) bool { return co.txnOwned[n].Load() },
		Metrics:       b.metrics,
		Logger:        b.log,
	})
	if co.groups, err = b.startGroups(co, all); err != nil {
		_ = writer.Stop()
		return err
	}
	for n := range slots.Count {
		co.txnOwned[n].Store(all)
		co.groupOwned[n].Store(all)
	}
	b.coord.Store(co)
	co.txns.Start()
	return nil
}

// closeCoordinators unpublishes the coordinators (requests from now on
// are answered NOT_COORDINATOR), answers parked group calls, stops the
// transaction actors, then the transaction state writer (no transition
// is on its way to it any more), then the groups and the offsets writer
// (no marker is on its way to them either). Both writers fsync every
// write before answering it, so closing writes nothing new; an error
// means a write could not be made durable.
func (b *Broker) closeCoordinators() error {
	co := b.coord.Swap(nil)
	if co == nil {
		return nil
	}
	co.groups.unload()
	co.txns.Stop()
	return errors.Join(co.writer.Stop(), co.groups.stop())
}

// coordinating is the open coordinators, or nil (a broker stopping).
func (b *Broker) coordinating() *coordinators { return b.coord.Load() }

// txnsFor is the transaction coordinator for transactionalID, or nil
// when this broker does not coordinate its slot (R-CRD-3: the
// transactional APIs answer NOT_COORDINATOR).
func (b *Broker) txnsFor(transactionalID string) *txn.Coordinator {
	co := b.coordinating()
	if co == nil || !co.txnOwned[slots.Of(transactionalID)].Load() {
		return nil
	}
	if h := b.cfg.testHooks; h != nil && h.foreignSlot != nil && h.foreignSlot(slots.Of(transactionalID)) {
		return nil // tests hand some slots to a peer
	}
	return co.txns
}

// txnEntries lists the persisted transaction entries this broker
// coordinates (the inspector, metrics, ListTransactions).
func (b *Broker) txnEntries() []txnstate.Entry {
	if co := b.coordinating(); co != nil {
		return co.store.All()
	}
	return nil
}

// txnEntry is one persisted transaction entry, if coordinated here.
func (b *Broker) txnEntry(id string) (txnstate.Entry, bool) {
	if co := b.coordinating(); co != nil {
		return co.store.Get(id)
	}
	return txnstate.Entry{}, false
}

// txnVerifier answers the partitions' transactional produce verification
// (R-PV-6) from whichever coordinator is open when the batch arrives.
type txnVerifier struct{ b *Broker }

func (v txnVerifier) VerifyTxn(id string, pid int64, epoch int16, topic string, p int32) int16 {
	if co := v.b.coordinating(); co != nil && co.txnOwned[slots.Of(id)].Load() {
		return co.txns.VerifyTxn(id, pid, epoch, topic, p)
	}
	if v.b.cluster != nil {
		return partition.VerifyRemotely // the coordinator is a peer (broker/peers)
	}
	return kerr.NotEnoughReplicas.Code // stopping; producers retry
}
