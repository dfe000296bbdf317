// Package txnwriter is the transaction state writer: the slot writer
// (actors/slotwriter) of the transaction slot logs under
// <data>/__cluster/txn_state/ (storage/txnlog on storage/slotlog). Every
// transactional id's actor hands it its transitions (txn.Store's Persist
// and Remove); the writer appends them as they come and fsyncs each
// slot's log once for everything waiting on it, then publishes the new
// entries to the lock-free view and answers. Reads
// (produce verification on partition actors, actors starting, describe)
// go to that view and never wait for the writer or take a lock.
package txnwriter

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/slotwriter"
	"kaas/actors/system"
	"kaas/model/slots"
	"kaas/model/txnstate"
	"kaas/state/txncoord"
	"kaas/storage/slotlog"
	"kaas/storage/txnlog"
)

// ErrLeaseInDoubt refuses a write while the lease its slot was claimed
// under is not certainly alive (Start's alive). It wraps
// txncoord.ErrRefused: the log is intact, and a Complete* it refused is
// written again.
var ErrLeaseInDoubt = fmt.Errorf("cluster lease not certainly alive: a peer may own the coordinator slots now (%w)", txncoord.ErrRefused)

// Observer receives the writer's measurements: each fsync of a slot's
// log, how long it took and how many transitions it made durable.
type Observer = slotwriter.Observer

// Handle is the coordinator's store: reads from the view, writes through
// the actor.
type Handle struct {
	sys   *system.System
	pid   *actor.PID
	store *txnlog.Store
	alive func(slot int) bool // the lease gate of each slot, nil for a single broker
	// closeErr is set by the actor as it stops.
	closeErr error
}

// Start spawns the writer as txnlog/writer over an opened store; it owns
// the store's writes from now on. (Not in the "txn" kind: those actors are
// named by transactional id, and any name may be one.)
//
// alive (nil for a single broker) is the lease gate, as the offsets
// writer's: no write starts, and none is acknowledged, unless it says the
// lease the slot was claimed under is certainly alive, since a peer may
// own the slot once it could have expired — and may have sealed the file
// before the write reached it (broker/cluster_slots.go). A write whose
// fsync comes back once the lease is in doubt is answered
// ErrLeaseInDoubt and is NOT published to the view: the coordinator's
// actor keeps its entry as it was, and the view (which produce
// verification reads) must never say more than the actor was told, or a
// partition it does not count in the transaction would take the
// transaction's data and never get its marker.
//
// flushInterval > 0 is --flush-interval-ms (Apache's log.flush.interval.ms
// applies to __transaction_state too): a write is answered and published
// once it is in the slot's log (page cache), the lease gate still checked
// after the write, and the log is fsynced within the interval. The order
// the coordinator relies on (Prepare* before the markers, the markers
// before Complete*) is still the order of the writes; that they survive a
// power loss is then the operator's choice.
func Start(sys *system.System, st *txnlog.Store, observer Observer, logger *slog.Logger, alive func(slot int) bool, flushInterval time.Duration) (*Handle, error) {
	h := &Handle{sys: sys, store: st, alive: alive}
	logger = logger.With("actor", "txnlog/writer")
	w := &writer{st: st, log: logger, handle: h}
	pid, err := slotwriter.Spawn(sys, "txnlog", "writer", "a transaction log", w, observer, logger, flushInterval)
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
//
// e's slices are not copied: the coordinator's state machine never
// writes into an entry's slices (a transition builds new ones, see
// txnstate.Entry.WithPartitions), and the view copies what it publishes.
func (h *Handle) Persist(e txnstate.Entry, done func(error)) {
	h.sys.Send(h.pid, &write{entry: e, done: done})
}

// PersistLazily is Persist for a write nothing waits for (Complete*, see
// state/txncoord): it is appended after every write sent before it, but
// starts no fsync of its own; the next Persist to its slot covers it, or
// an fsync of its own once it is slotwriter.LazySync old (at most 1.5 ×
// LazySync after it came). done is called once it is durable.
func (h *Handle) PersistLazily(e txnstate.Entry, done func(error)) {
	h.sys.Send(h.pid, &write{entry: e, done: done, lazy: true})
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

// writer is the transaction state's Kind of slot writer: its writes and
// slot operations, run inside the slotwriter actor.
type writer struct {
	st     *txnlog.Store
	log    *slog.Logger
	handle *Handle
}

// Receive handles the transaction state's own messages.
func (w *writer) Receive(sw *slotwriter.Writer, msg any) bool {
	switch m := msg.(type) {
	case *write:
		w.write(sw, m)
	case *slotOp:
		if m.open {
			m.done <- w.st.OpenSlot(m.n, m.owner)
			return true
		}
		// Every write to the slot is answered before it closes.
		for _, s := range w.st.Slots() {
			if s.Num == m.n {
				sw.Release(s.Log())
			}
		}
		m.done <- w.st.CloseSlot(m.n)
	default:
		return false
	}
	return true
}

// Stopping closes the logs once every write is answered.
func (w *writer) Stopping() {
	if err := w.st.Close(); err != nil {
		w.log.Error("closing transaction logs: not everything written is durable", "err", err)
		w.handle.closeErr = err
	}
}

func (w *writer) write(sw *slotwriter.Writer, m *write) {
	id := m.entry.TransactionalID
	if m.remove != "" {
		id = m.remove
	}
	if !w.alive(id) {
		m.done(ErrLeaseInDoubt)
		return
	}
	var err error
	if m.remove != "" {
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
		if err == nil && !w.alive(id) {
			// Durable, but a peer may have sealed the slot before it
			// got there: not acknowledged, not published. Logged: the
			// log holds an entry its coordinator was told failed.
			w.log.Warn("transaction state fsynced after the slot's lease fell in doubt; refused and not published",
				"transactional_id", id, "state", m.entry.State.String(), "partitions", len(m.entry.Partitions), "remove", m.remove != "")
			err = ErrLeaseInDoubt
		}
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
		sw.WaitLazily(slot, slot.Log(), done)
		return
	}
	sw.Wait(slot, slot.Log(), done)
}

// alive reports whether id's slot may write and acknowledge now (Start's
// alive).
func (w *writer) alive(id string) bool {
	return w.handle.alive == nil || w.handle.alive(slots.Of(id))
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

// Summary is what the inspector shows: each slot's log.
func (w *writer) Summary() any {
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
