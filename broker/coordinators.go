package broker

// The transaction and group coordinators with the stores behind them,
// opened as one bundle: for the broker's whole life in single-broker mode,
// and in a cluster only while this broker owns the coordinator unit
// (ownership.CoordinatorUnit, every transaction-state and group-offsets
// slot), so no two brokers ever write one slot file. A broker that takes
// the unit over opens the stores from the shared volume as a restart
// does: each slot's coordinator epoch goes up (markers of the previous
// owner are fenced, R-MRK-3), every Prepare* transaction is finished and
// every Ongoing one gets its timeout back (txn.Coordinator.Start), and
// the groups' offsets are loaded; members rejoin when their next request
// is answered NOT_COORDINATOR.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/partition"
	"kaas/actors/txn"
	"kaas/actors/txnwriter"
	"kaas/storage/slots"
	"kaas/storage/txnlog"
)

// coordinators is one opening of the coordinator state.
type coordinators struct {
	store  *txnlog.Store
	writer *txnwriter.Handle // the only writer of store
	txns   *txn.Coordinator
	groups *groupCoordinator
}

// openCoordinators opens the transaction store and the offsets logs,
// spawns both coordinators, publishes them and resumes unfinished
// transactions.
func (b *Broker) openCoordinators() error {
	store, err := txnlog.Open(b.env)
	if err != nil {
		return fmt.Errorf("opening transaction state: %w", err)
	}
	writer, err := txnwriter.Start(b.sys, store, txnLogObserver{b.metrics}, b.log)
	if err != nil {
		_ = store.Close()
		return err
	}
	txns := txn.New(b.sys, txn.Config{
		Store:         gatedStore{Store: writer, alive: b.leaseAlive},
		PIDs:          b.pids,
		Fencer:        b.fence,
		Markers:       markerWriter{b},
		AbortInterval: b.cfg.TxnAbortInterval,
		Expiration:    b.cfg.TransactionalIDExpiration,
		Metrics:       b.metrics,
		Logger:        b.log,
	})
	groups, err := b.startGroups()
	if err != nil {
		_ = writer.Stop()
		return err
	}
	b.coord.Store(&coordinators{store: store, writer: writer, txns: txns, groups: groups})
	txns.Start()
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

// coordinating is the open coordinators, or nil (a cluster broker that
// does not own the coordinator unit, or one stopping).
func (b *Broker) coordinating() *coordinators { return b.coord.Load() }

// txnsFor is the transaction coordinator for transactionalID, or nil
// when this broker does not coordinate its slot (R-CRD-3: the
// transactional APIs answer NOT_COORDINATOR).
func (b *Broker) txnsFor(transactionalID string) *txn.Coordinator {
	co := b.coordinating()
	if co == nil {
		return nil
	}
	if h := b.cfg.testHooks; h != nil && h.foreignSlot != nil && h.foreignSlot(slots.Of(transactionalID)) {
		return nil // tests hand some slots to a peer
	}
	return co.txns
}

// txnEntries lists the persisted transaction entries this broker
// coordinates (the inspector, metrics, ListTransactions).
func (b *Broker) txnEntries() []txnlog.Entry {
	if co := b.coordinating(); co != nil {
		return co.store.All()
	}
	return nil
}

// txnEntry is one persisted transaction entry, if coordinated here.
func (b *Broker) txnEntry(id string) (txnlog.Entry, bool) {
	if co := b.coordinating(); co != nil {
		return co.store.Get(id)
	}
	return txnlog.Entry{}, false
}

// txnVerifier answers the partitions' transactional produce verification
// (R-PV-6) from whichever coordinator is open when the batch arrives.
type txnVerifier struct{ b *Broker }

func (v txnVerifier) VerifyTxn(id string, pid int64, epoch int16, topic string, p int32) int16 {
	if co := v.b.coordinating(); co != nil {
		return co.txns.VerifyTxn(id, pid, epoch, topic, p)
	}
	if v.b.cluster != nil {
		return partition.VerifyRemotely // the coordinator is a peer (peers.go)
	}
	return kerr.NotEnoughReplicas.Code // stopping; producers retry
}

// errLeaseInDoubt refuses a coordinator write while this broker's lease
// is not certainly alive.
var errLeaseInDoubt = errors.New("cluster lease not certainly alive: a peer may own the coordinator slots now")

// gatedStore is the transaction store as the coordinator writes it: in a
// cluster, no write starts unless this broker's lease is certainly alive
// (as the partitions' Gate), since a peer may own the slot files once it
// could have expired. The write fails, and the client retries at the
// coordinator FindCoordinator names then.
type gatedStore struct {
	txn.Store
	alive func() bool
}

func (s gatedStore) Persist(e txnlog.Entry, done func(error)) {
	if !s.alive() {
		done(errLeaseInDoubt)
		return
	}
	s.Store.Persist(e, done)
}

func (s gatedStore) PersistLazily(e txnlog.Entry, done func(error)) {
	if !s.alive() {
		done(errLeaseInDoubt)
		return
	}
	s.Store.PersistLazily(e, done)
}

func (s gatedStore) Remove(id string, done func(error)) {
	if !s.alive() {
		done(errLeaseInDoubt)
		return
	}
	s.Store.Remove(id, done)
}
