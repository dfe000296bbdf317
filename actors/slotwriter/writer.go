// Package slotwriter is the one actor that writes coordinator slot logs
// (storage/slotlog): the consumer offsets (actors/offsetwriter) and the
// transaction state (actors/txnwriter) each run one, parameterised by a
// Kind that says what it writes. The writer holds what the two share: it
// appends as messages come, fsyncs each slot's log once for everything
// waiting on it (group commit across the slot's writers, the slots'
// fsyncs running concurrently off the actor: slotlog.Group; a lone one
// with nothing else in the mailbox runs inline), fsyncs lazy
// writes nothing waits for once they are LazySync old, answers each
// write once its fsync is done (in flush-interval mode, once it is
// written, with each slot fsynced within the interval:
// slotlog.Group.FlushEvery), compacts an idle slot's log, and fsyncs
// and closes every log as it stops.
//
// The Kind does the rest inside the actor: its own messages (appends,
// opening and closing slots, with their lease gates and failure
// answers), its inspector summary and its close.
package slotwriter

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/system"
	"kaas/storage/slotlog"
)

// Kind is what a writer writes. Its methods run inside the writer's
// actor, one message at a time, so the Kind's state needs no lock.
type Kind interface {
	// Receive handles one of the Kind's own messages and reports
	// whether msg was one.
	Receive(w *Writer, msg any) bool
	// Summary is what the inspector shows for the writer.
	Summary() any
	// Stopping runs as the writer stops, after every write waiting for
	// an fsync has been answered: the Kind closes its logs and keeps
	// what could not be made durable.
	Stopping()
}

// Observer receives a writer's measurements.
type Observer interface {
	// Synced reports one fsync of a slot's log: how long it took and how
	// many writes it made durable.
	Synced(d time.Duration, appends int)
}

// LazySync bounds how long a lazy write (WaitLazily) waits for a write
// that starts an fsync of its slot before it is fsynced on its own.
const LazySync = 20 * time.Millisecond

// Writer is the actor: the slot logs' group commit around a Kind.
type Writer struct {
	kind    Kind
	sys     *system.System
	self    *actor.PID
	log     *slog.Logger
	observe func(time.Duration, int) // the observer's Synced, or nil
	what    string                   // for the log: "an offsets log", "a transaction log"

	mailbox     *system.MailboxStats // the actor's own, looked up at its first flush
	group       slotlog.Group        // the writes waiting for their slot's fsync
	flushQueued bool                 // a flushNow is in the mailbox
	lazyArmed   bool                 // a flushLazy is on its way
}

type flushNow struct{}

// flushDue is the flush-interval mode's tick (slotlog.Group.FlushEvery).
type flushDue struct{}

// flushLazy fsyncs the slots that only lazy writes wait on.
type flushLazy struct{}

// Spawn starts a writer of kind as kind/name. what names one of its logs
// in log lines ("an offsets log"). flushInterval > 0 is the
// flush-interval mode (--flush-interval-ms): writes are answered once
// written and each slot's log is fsynced within the interval.
func Spawn(sys *system.System, kindName, name, what string, k Kind, observer Observer, logger *slog.Logger, flushInterval time.Duration) (*actor.PID, error) {
	w := &Writer{kind: k, sys: sys, log: logger, what: what}
	w.group.FlushEvery(flushInterval, w.armDue)
	if observer != nil {
		w.observe = observer.Synced
	}
	return sys.Spawn(kindName, name, w, sys.Inspect)
}

// Receive is the actor's message loop.
func (w *Writer) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		w.self = c.Self()
	case flushNow:
		w.flushQueued = false
		w.flush()
	case flushDue:
		if err := w.group.FlushDue(w.observe, w.deliver); err != nil {
			w.log.Error("compacting "+w.what, "err", err)
		}
	case flushLazy:
		w.lazyArmed = false
		w.group.FlushLazy(time.Now().Add(-LazySync), w.deliver)
		w.armLazy()
	case *slotlog.Synced:
		// The group compacts the slot's log once it is idle and has
		// outgrown its state (inside the actor: no lock is held, no
		// fsync of it runs, nobody reads the file).
		if err := w.group.Done(m, w.observe, w.deliver); err != nil {
			w.log.Error("compacting "+w.what, "err", err)
		}
	case *system.InspectRequest:
		m.Reply <- w.kind.Summary()
	case *actor.Stopping:
		w.group.Close(w.observe)
		w.kind.Stopping()
	default:
		w.kind.Receive(w, m)
	}
}

// flush starts the fsyncs the writes waiting need: inline when nothing
// else waits in the mailbox and one slot alone needs one
// (slotlog.Group.FlushIdle says why), else each off the actor.
func (w *Writer) flush() {
	if w.mailbox == nil {
		if i, ok := w.sys.LookupPID(w.self); ok {
			w.mailbox = i.Mailbox
		}
	}
	if err := w.group.FlushIdle(w.mailbox != nil && w.mailbox.Depth() == 0, w.observe, w.deliver); err != nil {
		w.log.Error("compacting "+w.what, "err", err)
	}
}

// Wait calls done once l, written for owner, is fsynced: one fsync of
// each slot covers every write waiting on it when the writer gets to it.
func (w *Writer) Wait(owner slotlog.Compactable, l *slotlog.Log, done func(error)) {
	w.group.Wait(owner, l, done)
	if !w.flushQueued && w.group.Interval() == 0 {
		// Queued behind the writes already in the mailbox, so one fsync
		// of each slot covers all of them.
		w.flushQueued = true
		w.sys.Send(w.self, flushNow{})
	}
}

// WaitLazily is Wait for a write nothing waits for: it starts no fsync
// of its own; the next Wait on its slot covers it, or an fsync of its
// own once it is LazySync old (at most 1.5 × LazySync after it came).
func (w *Writer) WaitLazily(owner slotlog.Compactable, l *slotlog.Log, done func(error)) {
	w.group.WaitLazily(owner, l, done)
	if w.group.Interval() == 0 {
		w.armLazy()
	}
}

// Release answers every write waiting on l (fsyncing it first), before
// its slot closes.
func (w *Writer) Release(l *slotlog.Log) { w.group.Release(l, w.observe) }

// armLazy makes sure lazy writes not yet covered by an fsync get one
// once they are LazySync old: it looks every LazySync/2, so one waits at
// most 1.5 × LazySync.
func (w *Writer) armLazy() {
	if w.lazyArmed || w.group.Unstarted() == 0 {
		return
	}
	w.lazyArmed = true
	sys, self := w.sys, w.self
	time.AfterFunc(LazySync/2, func() { sys.Send(self, flushLazy{}) })
}

// armDue sends the writer a flushDue after d (flush-interval mode).
func (w *Writer) armDue(d time.Duration) {
	sys, self := w.sys, w.self
	time.AfterFunc(d, func() { sys.Send(self, flushDue{}) })
}

// deliver hands a slot's finished fsync back to the actor (from the
// goroutine that ran it).
func (w *Writer) deliver(s *slotlog.Synced) { w.sys.Send(w.self, s) }
