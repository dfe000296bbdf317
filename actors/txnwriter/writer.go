// Package txnwriter is the transaction state writer: the one actor that
// appends to the transaction slot logs under <data>/__cluster/txn_state/
// (storage/txnlog on storage/slotlog). Every transactional id's actor hands
// it its transitions (txn.Store's Persist and Remove); the writer appends
// them as they come and fsyncs each slot's log once for everything
// waiting on it, the slots' fsyncs running concurrently off the actor
// (storage/slotlog.Group, the offsets writer's design), then publishes the
// new entries to the lock-free view and answers. Reads
// (produce verification on partition actors, actors starting, describe)
// go to that view and never wait for the writer or take a lock.
package txnwriter

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/system"
	"kaas/model/txnstate"
	"kaas/storage/slotlog"
	"kaas/storage/txnlog"
)

// Observer receives the writer's measurements.
type Observer interface {
	// Synced reports one fsync of a slot's log: how long it took and how
	// many transitions it made durable.
	Synced(d time.Duration, appends int)
}

// Handle is the coordinator's store: reads from the view, writes through
// the actor.
type Handle struct {
	sys   *system.System
	pid   *actor.PID
	store *txnlog.Store
	// closeErr is set by the actor as it stops.
	closeErr error
}

// Start spawns the writer as txnlog/writer over an opened store; it owns
// the store's writes from now on. (Not in the "txn" kind: those actors are
// named by transactional id, and any name may be one.)
func Start(sys *system.System, st *txnlog.Store, observer Observer, logger *slog.Logger) (*Handle, error) {
	h := &Handle{sys: sys, store: st}
	w := &writer{st: st, log: logger.With("actor", "txnlog/writer"), handle: h}
	if observer != nil {
		w.observe = observer.Synced
	}
	pid, err := sys.Spawn("txnlog", "writer", w, sys.Inspect)
	if err != nil {
		return nil, err
	}
	h.pid = pid
	return h, nil
}

// Get returns id's durable entry, without asking the writer.
func (h *Handle) Get(id string) (txnstate.Entry, bool) { return h.store.Get(id) }

// All returns every durable entry, sorted.
func (h *Handle) All() []txnstate.Entry { return h.store.All() }

// CoordinatorEpoch is id's slot's ownership epoch.
func (h *Handle) CoordinatorEpoch(id string) int32 { return h.store.CoordinatorEpoch(id) }

// Persist makes e durable, then calls done (from the writer) with nil or
// the error that failed it: the slot's log is then offline until a
// restart, and every later write to it fails too.
func (h *Handle) Persist(e txnstate.Entry, done func(error)) {
	h.sys.Send(h.pid, &write{entry: e.Clone(), done: done})
}

// PersistLazily is Persist for a write nothing waits for (Complete*, see
// state/txncoord): it is appended after every write sent before it, but
// starts no fsync of its own; the next Persist to its slot covers it, or
// an fsync of its own once it is lazySync old (at most 1.5 × lazySync
// after it came). done is called once it is durable.
func (h *Handle) PersistLazily(e txnstate.Entry, done func(error)) {
	h.sys.Send(h.pid, &write{entry: e.Clone(), done: done, lazy: true})
}

// lazySync bounds how long a lazy write waits for a Persist to its slot
// before it is fsynced on its own.
const lazySync = 20 * time.Millisecond

// Remove deletes id's entry durably (expiry), then calls done.
func (h *Handle) Remove(id string, done func(error)) {
	h.sys.Send(h.pid, &write{remove: id, done: done})
}

// Stop stops the writer after what is queued (it fsyncs and closes the
// logs) and returns what could not be made durable.
func (h *Handle) Stop() error {
	h.sys.Stop(h.pid)
	return h.closeErr
}

// OpenSlot takes slot n over in the writer (which owns the store's
// writes): txnlog.Store.OpenSlot at generation gen. It waits for the
// writer.
func (h *Handle) OpenSlot(n int, owner slotlog.Owner) error {
	done := make(chan error, 1)
	h.sys.Send(h.pid, &slotOp{open: true, n: n, owner: owner, done: done})
	err, _ := system.Await(context.Background(), done)
	return err
}

// CloseSlot makes everything written to slot n durable, closes it and
// drops its entries from the view; it returns what could not be made
// durable. It waits for the writer.
func (h *Handle) CloseSlot(n int) error {
	done := make(chan error, 1)
	h.sys.Send(h.pid, &slotOp{n: n, done: done})
	err, _ := system.Await(context.Background(), done)
	return err
}

// slotOp opens or closes one slot.
type slotOp struct {
	open  bool
	n     int
	owner slotlog.Owner
	done  chan error
}

// Fail answers an operation whose handling panicked.
func (o *slotOp) Fail(reason any) {
	o.done <- fmt.Errorf("transaction state writer failed: %v", reason)
}

type write struct {
	entry  txnstate.Entry
	remove string
	done   func(error)
	lazy   bool
}

// Fail answers a write whose handling panicked.
func (w *write) Fail(reason any) { w.done(fmt.Errorf("transaction state writer failed: %v", reason)) }

type flushNow struct{}

// flushLazy fsyncs the slots that only lazy writes wait on.
type flushLazy struct{}

type writer struct {
	st          *txnlog.Store
	log         *slog.Logger
	observe     func(time.Duration, int) // the observer's Synced, or nil
	handle      *Handle
	self        *actor.PID
	group       slotlog.Group
	flushQueued bool
	lazyArmed   bool // a flushLazy is on its way
}

func (w *writer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		w.self = c.Self()
	case *write:
		w.write(c, m)
	case flushNow:
		w.flushQueued = false
		w.group.Flush(w.deliver)
	case flushLazy:
		w.lazyArmed = false
		w.group.FlushLazy(time.Now().Add(-lazySync), w.deliver)
		w.armLazy()
	case *slotlog.Synced:
		w.synced(m)
	case *slotOp:
		if m.open {
			m.done <- w.st.OpenSlot(m.n, m.owner)
			return
		}
		// Every write to the slot is answered before it closes.
		for _, s := range w.st.Slots() {
			if s.Num == m.n {
				w.group.Release(s.Log(), w.observe)
			}
		}
		m.done <- w.st.CloseSlot(m.n)
	case *system.InspectRequest:
		m.Reply <- w.summary()
	case *actor.Stopping:
		w.group.Close(w.observe)
		if err := w.st.Close(); err != nil {
			w.log.Error("closing transaction logs: not everything written is durable", "err", err)
			w.handle.closeErr = err
		}
	}
}

func (w *writer) write(c actor.Context, m *write) {
	var err error
	id := m.entry.TransactionalID
	if m.remove != "" {
		id = m.remove
		err = w.st.AppendDelete(m.remove)
	} else {
		err = w.st.Append(m.entry)
	}
	slot := w.st.Slot(id)
	if err != nil {
		if slot == nil { // handed to another broker (txnlog.ErrNotOwned)
			m.done(err)
			return
		}
		w.log.Error("transaction log unavailable", "slot", slot.Num, "err", err)
		m.done(err)
		return
	}
	done := func(err error) {
		if err == nil {
			if m.remove != "" {
				w.st.PublishedDelete(m.remove)
			} else {
				w.st.Published(m.entry)
			}
		}
		m.done(err)
	}
	if m.lazy {
		w.group.WaitLazily(slot, slot.Log(), done)
		w.armLazy()
		return
	}
	w.group.Wait(slot, slot.Log(), done)
	if !w.flushQueued {
		// Queued behind the writes already in the mailbox, so one fsync
		// of each slot covers all of them.
		w.flushQueued = true
		c.Send(w.self, flushNow{})
	}
}

// armLazy makes sure lazy writes not yet covered by an fsync get one
// once they are lazySync old: it looks every lazySync/2, so one waits at
// most 1.5 × lazySync.
func (w *writer) armLazy() {
	if w.lazyArmed || w.group.Unstarted() == 0 {
		return
	}
	w.lazyArmed = true
	sys, self := w.handle.sys, w.self
	time.AfterFunc(lazySync/2, func() { sys.Send(self, flushLazy{}) })
}

// deliver hands a slot's finished fsync back to the actor (from the
// goroutine that ran it).
func (w *writer) deliver(s *slotlog.Synced) { w.handle.sys.Send(w.self, s) }

// synced publishes and answers what a slot's fsync covered; the group
// compacts the slot's log once it is idle and has outgrown its entries
// (inside the actor: no lock is held, no fsync of it runs, nobody reads
// the file).
func (w *writer) synced(m *slotlog.Synced) {
	if err := w.group.Done(m, w.observe, w.deliver); err != nil {
		w.log.Error("compacting a transaction log", "err", err)
	}
}

// Summary is what the inspector shows for the writer.
type Summary struct {
	Slots []SlotSummary `json:"slots"`
}

// SlotSummary is one slot log.
type SlotSummary struct {
	Slot      int    `json:"slot"`
	SizeBytes int64  `json:"size_bytes"`
	Failed    string `json:"failed,omitempty"`
}

func (w *writer) summary() Summary {
	var s Summary
	for _, sl := range w.st.Slots() {
		ss := SlotSummary{Slot: sl.Num, SizeBytes: sl.Log().Size()}
		if err := sl.Log().Failed(); err != nil {
			ss.Failed = err.Error()
		}
		s.Slots = append(s.Slots, ss)
	}
	return s
}
