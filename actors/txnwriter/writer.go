// Package txnwriter is the transaction state writer: the one actor that
// appends to the transaction slot logs under <data>/__cluster/txn_state/
// (storage/txnlog on storage/slotlog). Every transactional id's actor hands
// it its transitions (txn.Store's Persist and Remove); the writer appends
// them as they come and fsyncs once for everything waiting — group commit
// across transactional ids and slots, the offsets writer's design — then
// publishes the new entries to the lock-free view and answers. Reads
// (produce verification on partition actors, actors starting, describe)
// go to that view and never wait for the writer or take a lock.
package txnwriter

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/system"
	"kaas/storage/slotlog"
	"kaas/storage/txnlog"
)

// Observer receives the writer's measurements.
type Observer interface {
	// Synced reports one fsync round: how long it took and how many
	// transitions it made durable.
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
		w.synced = observer.Synced
	}
	pid, err := sys.Spawn("txnlog", "writer", w, sys.Inspect)
	if err != nil {
		return nil, err
	}
	h.pid = pid
	return h, nil
}

// Get returns id's durable entry, without asking the writer.
func (h *Handle) Get(id string) (txnlog.Entry, bool) { return h.store.Get(id) }

// All returns every durable entry, sorted.
func (h *Handle) All() []txnlog.Entry { return h.store.All() }

// CoordinatorEpoch is id's slot's ownership epoch.
func (h *Handle) CoordinatorEpoch(id string) int32 { return h.store.CoordinatorEpoch(id) }

// Persist makes e durable, then calls done (from the writer) with nil or
// the error that failed it: the slot's log is then offline until a
// restart, and every later write to it fails too.
func (h *Handle) Persist(e txnlog.Entry, done func(error)) {
	h.sys.Send(h.pid, &write{entry: e.Clone(), done: done})
}

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
func (h *Handle) OpenSlot(n int, gen int64) error {
	done := make(chan error, 1)
	h.sys.Send(h.pid, &slotOp{open: true, n: n, gen: gen, done: done})
	return <-done
}

// CloseSlot makes everything written to slot n durable, closes it and
// drops its entries from the view; it returns what could not be made
// durable. It waits for the writer.
func (h *Handle) CloseSlot(n int) error {
	done := make(chan error, 1)
	h.sys.Send(h.pid, &slotOp{n: n, done: done})
	return <-done
}

// slotOp opens or closes one slot.
type slotOp struct {
	open bool
	n    int
	gen  int64
	done chan error
}

// Fail answers an operation whose handling panicked.
func (o *slotOp) Fail(reason any) {
	o.done <- fmt.Errorf("transaction state writer failed: %v", reason)
}

type write struct {
	entry  txnlog.Entry
	remove string
	done   func(error)
}

// Fail answers a write whose handling panicked.
func (w *write) Fail(reason any) { w.done(fmt.Errorf("transaction state writer failed: %v", reason)) }

type flushNow struct{}

type writer struct {
	st          *txnlog.Store
	log         *slog.Logger
	synced      func(time.Duration, int) // the observer's Synced, or nil
	handle      *Handle
	self        *actor.PID
	group       slotlog.Group
	flushQueued bool
}

func (w *writer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		w.self = c.Self()
	case *write:
		w.write(c, m)
	case flushNow:
		w.flushQueued = false
		w.flush()
	case *slotOp:
		if m.open {
			m.done <- w.st.OpenSlot(m.n, m.gen)
			return
		}
		w.flush() // every write to the slot is answered before it closes
		m.done <- w.st.CloseSlot(m.n)
	case *system.InspectRequest:
		m.Reply <- w.summary()
	case *actor.Stopping:
		w.flush()
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
	w.group.Wait(slot.Log(), func(err error) {
		if err == nil {
			if m.remove != "" {
				w.st.PublishedDelete(m.remove)
			} else {
				w.st.Published(m.entry)
			}
		}
		m.done(err)
	})
	if !w.flushQueued {
		// Queued behind the writes already in the mailbox, so one fsync
		// round covers all of them.
		w.flushQueued = true
		c.Send(w.self, flushNow{})
	}
}

// flush fsyncs every slot written since the last round, publishes and
// answers what it covered, and compacts logs that have outgrown their
// entries (inside the actor: no lock is held, and nobody reads the files).
func (w *writer) flush() {
	if !w.group.Flush(w.synced) {
		return
	}
	for _, s := range w.st.Slots() {
		if s.NeedsCompaction() {
			if err := s.Compact(); err != nil {
				w.log.Error("compacting a transaction log", "slot", s.Num, "err", err)
			}
		}
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
