package share

// Where share-partitions are persisted. A single broker keeps every one
// in its one share state log (Config.Store). A cluster broker keeps each
// partition's in a log of its own on the shared volume, owned with the
// partition (docs/groups.md, "Share groups in a cluster"): the broker
// opens it when it takes the partition over and hands it here
// (Handle.OpenPartition) before it publishes the partition, and takes it
// back when the partition goes (Handle.ClosePartition). A share-partition
// whose log is not here is not served here (NOT_LEADER_OR_FOLLOWER), so a
// fetch can never start a fresh window for a partition whose state has
// not been loaded yet.
//
// Every write, and every acknowledgement that waits on one, asks the
// partition's lease gate first: a deposed owner answers
// NOT_LEADER_OR_FOLLOWER and writes nothing.

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/storage/sharestate"
)

// partStore is the log a share-partition is written to, and the lease
// gate of its writes (nil: always open, a single broker).
type partStore struct {
	store *sharestate.Store
	// open opens the log the first time a share group uses the partition
	// (store nil until then): a partition no share group reads gets no
	// file, and its takeover no copy.
	open OpenFunc
	gate func() bool
}

// OpenFunc opens a partition's share state log (sharestate.OpenPartition
// for the partition's owner).
type OpenFunc func() (*sharestate.Store, map[sharestate.Key]sharestate.Record, error)

// openPartition is a partition taken over here: its share state log if it
// is open already (with what it held), else how to open it.
type openPartition struct {
	tp     model.TopicIDPartition
	store  *sharestate.Store
	loaded map[sharestate.Key]sharestate.Record
	open   OpenFunc
	gate   func() bool
}

// closePartition is a partition given up here; done is closed once its
// state is dropped and its log closed.
type closePartition struct {
	tp   model.TopicIDPartition
	done chan struct{}
}

// unloadMembers is an offsets slot given up here: the membership of its
// groups goes (see sharegroup.UnloadMembers).
type unloadMembers struct{ in func(group string) bool }

// OpenPartition hands the actor a partition taken over here (cluster):
// from this message on, its share-partitions are served here. store is
// its share state log, opened by the takeover, with what it held; nil
// when the partition had none yet, and open makes it at first use. gate
// is the partition's lease gate.
func (h *Handle) OpenPartition(tp model.TopicIDPartition, store *sharestate.Store, loaded map[sharestate.Key]sharestate.Record, open OpenFunc, gate func() bool) {
	h.Send(&openPartition{tp: tp, store: store, loaded: loaded, open: open, gate: gate})
}

// ClosePartition takes a partition's share state back (cluster) and waits
// until the actor dropped it and closed its log (what was acknowledged is
// already durable; what waits on an fsync is answered first).
func (h *Handle) ClosePartition(tp model.TopicIDPartition) {
	done := make(chan struct{})
	h.Send(&closePartition{tp: tp, done: done})
	<-done
}

// UnloadMembers drops the membership of the groups in (their offsets slot
// moved away).
func (h *Handle) UnloadMembers(in func(group string) bool) { h.Send(&unloadMembers{in: in}) }

// storeFor is where tp's share-partitions are written, or the code to
// answer for it: NOT_LEADER_OR_FOLLOWER when its log is not here or its
// lease is in doubt, KAFKA_STORAGE_ERROR when the log is offline.
func (a *shareActor) storeFor(tp model.TopicIDPartition) (partStore, int16) {
	ps := partStore{store: a.cfg.Store}
	if ps.store == nil {
		var ok bool
		if ps, ok = a.stores[tp]; !ok {
			return ps, kerr.NotLeaderForPartition.Code
		}
	}
	if ps.gate != nil && !ps.gate() {
		return ps, kerr.NotLeaderForPartition.Code
	}
	if ps.store == nil {
		// The first share group on this partition since it came here: its
		// log is created (or a file a deposed owner made meanwhile is
		// sealed and loaded). Once per partition and owner, on the actor.
		st, loaded, err := ps.open()
		if err != nil {
			a.cfg.Logger.Error("opening a partition's share state failed", "topic_id", tp.Topic, "partition", tp.Partition, "err", err)
			return ps, kerr.KafkaStorageError.Code
		}
		ps.store = st
		a.stores[tp] = ps
		a.load(loaded)
	}
	if ps.store.Failed() != nil {
		return ps, kerr.KafkaStorageError.Code
	}
	return ps, 0
}

func (a *shareActor) openPartition(m *openPartition) {
	if old, ok := a.stores[m.tp]; ok && old.store != nil && old.store != m.store {
		a.closeStore(m.tp, old.store)
	}
	a.stores[m.tp] = partStore{store: m.store, open: m.open, gate: m.gate}
	a.c.DropPartition(m.tp) // nothing of an earlier ownership stays
	a.load(m.loaded)
}

func (a *shareActor) closePartition(m *closePartition) {
	defer close(m.done)
	a.c.DropPartition(m.tp)
	for k := range a.dirty {
		if (model.TopicIDPartition{Topic: k.Topic, Partition: k.Partition}) == m.tp {
			delete(a.dirty, k)
		}
	}
	ps, ok := a.stores[m.tp]
	if !ok {
		return
	}
	delete(a.stores, m.tp)
	if ps.store != nil {
		a.closeStore(m.tp, ps.store)
	}
}

// closeStore answers what waits on the log's fsync and closes it.
func (a *shareActor) closeStore(tp model.TopicIDPartition, st *sharestate.Store) {
	a.closing = true
	defer func() { a.closing = false }()
	a.syncs.Release(st.Log(), a.cfg.Synced)
	if err := st.Sync(); err != nil {
		a.cfg.Logger.Error("share state not durable when its partition was given up", "topic_id", tp.Topic, "partition", tp.Partition, "err", err)
	}
	_ = st.Close()
}

// closeStores syncs and closes every log (the actor stops).
func (a *shareActor) closeStores() {
	a.closing = true
	a.syncs.Close(a.cfg.Synced)
	if a.cfg.Store != nil {
		if err := a.cfg.Store.Sync(); err != nil {
			a.cfg.Logger.Error("share state not durable at shutdown", "err", err)
		}
		_ = a.cfg.Store.Close()
	}
	for tp, ps := range a.stores {
		if ps.store != nil {
			a.closeStore(tp, ps.store)
		}
	}
	clear(a.stores)
}

func (a *shareActor) unloadMembers(m *unloadMembers) {
	a.c.UnloadMembers(m.in)
}
