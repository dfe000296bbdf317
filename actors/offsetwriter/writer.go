// Package offsetwriter is the offsets writer: the slot writer
// (actors/slotwriter) of the slot logs under <data>/__cluster/offsets/
// (storage/offsetlog). Every group actor sends its commits and metadata
// here; the writer appends them as they come and fsyncs each slot's log
// once for everything waiting on it — group commit across groups —
// before answering any of them. It also keeps, per
// slot, the last producer epoch (R-TXN-13) and which groups hold staged
// offsets of a producer, from the log's replayed state.
package offsetwriter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/slotwriter"
	"kaas/actors/system"
	"kaas/model/slots"
	"kaas/storage/durable"
	"kaas/storage/offsetlog"
	"kaas/storage/slotlog"
)

// Append asks the writer to append Entry to Slot's log and to call Reply
// once it is durable (or failed).
type Append struct {
	Slot  int
	Entry offsetlog.Entry
	// Reply is called exactly once, from the writer.
	Reply func(Result)
}

// Result is the answer to an Append.
type Result struct {
	// Code is 0, KAFKA_STORAGE_ERROR when the log cannot be written, or
	// INVALID_PRODUCER_EPOCH for a transactional entry or marker whose
	// epoch is below the last one recorded for its producer (R-TXN-13).
	Code     int16
	FirstSeq uint64
	// Groups, for a commit or abort marker, are the groups that held
	// staged offsets of the producer in this slot.
	Groups []string
	// Durable: the entry is in the log even though Code refuses it (the
	// lease fell in doubt while its fsync ran). The slot's state already
	// includes it — a marker's Groups no longer hold the producer's
	// staged offsets there, so a retried marker reports none — and the
	// caller must bring what it keeps in memory in line with the log.
	Durable bool
}

// Fail answers an Append whose handling panicked.
func (a *Append) Fail(any) { a.Reply(Result{Code: kerr.UnknownServerError.Code}) }

// Observer receives the writer's measurements: each fsync of a slot's
// log, how long it took and how many appends it made durable.
type Observer = slotwriter.Observer

// Loaded is one group recovered from the logs at start-up.
type Loaded struct {
	Slot  int
	Group string
	State *offsetlog.GroupState // the caller's own copy
}

// Handle is how the broker reaches the writer.
type Handle struct {
	sys      *system.System
	pid      *actor.PID
	alive    func(slot int) bool // the lease gate of each slot (OpenNone), nil for none
	closeErr error               // set by the actor as it stops
	// views are the open slots' record views (__consumer_offsets
	// partition n), published by the writer for fetches to read.
	views [slots.Count]atomic.Pointer[offsetlog.View]
}

// View is slot n's record view, or nil when the slot is not open here
// (not owned, or never written).
func (h *Handle) View(n int) *offsetlog.View {
	if n < 0 || n >= len(h.views) {
		return nil
	}
	return h.views[n].Load()
}

func (h *Handle) publish(s *offsetlog.Slot) {
	if s.Num >= 0 && s.Num < len(h.views) && h.views[s.Num].Load() != s.View() {
		h.views[s.Num].Store(s.View())
	}
}

func (h *Handle) unpublish(n int) {
	if n >= 0 && n < len(h.views) {
		h.views[n].Store(nil)
	}
}

// Open recovers every slot log under dir (a single broker owns every
// slot), returns the groups found in them and spawns the writer as
// offsets/log. alive, if not nil, gates the writes as OpenNone's does; a
// single broker has no lease, so only its tests pass one (to put a
// slot's writes in doubt). flushInterval > 0 is --flush-interval-ms
// (Apache's log.flush.interval.ms applies to __consumer_offsets too): an
// append is answered once it is in its slot's log, the lease gate still
// checked after the write, and the log is fsynced within the interval.
func Open(sys *system.System, env durable.Env, dir string, opts offsetlog.Options, observer Observer, alive func(slot int) bool, flushInterval time.Duration) (*Handle, []Loaded, error) {
	d, err := offsetlog.OpenDir(env, dir, opts)
	if err != nil {
		return nil, nil, err
	}
	var loaded []Loaded
	for _, s := range d.Existing() {
		loaded = append(loaded, loadedOf(s)...)
	}
	h, err := start(sys, env.Or().Logger, d, observer, flushInterval)
	if h != nil {
		h.alive = alive // before any message: the writer reads it after
		for _, s := range d.Existing() {
			h.publish(s)
		}
	}
	return h, loaded, err
}

// OpenNone spawns the writer with no slot open: a cluster broker opens
// each slot (OpenSlot) while it owns it. No append starts, and none is
// acknowledged, unless alive says the lease the slot was claimed under is
// certainly alive (a peer may own the slot files once it could have
// expired, and a lease granted since is not the slot's): the others
// are answered NOT_COORDINATOR, as Apache's coordinator that lost
// leadership answers.
func OpenNone(sys *system.System, env durable.Env, dir string, opts offsetlog.Options, observer Observer, alive func(slot int) bool, flushInterval time.Duration) (*Handle, error) {
	d, err := offsetlog.NewDir(env, dir, opts)
	if err != nil {
		return nil, err
	}
	h, err := start(sys, env.Or().Logger, d, observer, flushInterval)
	if h != nil {
		h.alive = alive // before any message: the writer reads it after
	}
	return h, err
}

// loadedOf lists the groups of a recovered slot, by id.
func loadedOf(s *offsetlog.Slot) []Loaded {
	ids := make([]string, 0, len(s.State().Groups))
	for id := range s.State().Groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]Loaded, 0, len(ids))
	for _, id := range ids {
		out = append(out, Loaded{Slot: s.Num, Group: id, State: s.State().Groups[id].Clone()})
	}
	return out
}

func start(sys *system.System, logger *slog.Logger, d *offsetlog.Dir, observer Observer, flushInterval time.Duration) (*Handle, error) {
	h := &Handle{sys: sys}
	logger = logger.With("actor", "offsets/log")
	w := &writer{dir: d, log: logger, handle: h}
	pid, err := slotwriter.Spawn(sys, "offsets", "log", "an offsets log", w, observer, logger, flushInterval)
	if err != nil {
		d.Close()
		return nil, err
	}
	h.pid = pid
	return h, nil
}

// OpenSlot takes slot n over for an owner of generation gen (sealed
// against the previous owner: offsetlog.Dir.Claim) and returns its
// groups. It waits for the writer.
func (h *Handle) OpenSlot(n int, owner slotlog.Owner) ([]Loaded, error) {
	done := make(chan slotResult, 1)
	h.sys.Send(h.pid, &slotOp{open: true, n: n, owner: owner, done: done})
	r, _ := system.Await(context.Background(), done)
	return r.loaded, r.err
}

// CloseSlot makes everything appended to slot n durable (answering those
// appends) and closes it; it returns what could not be made durable. It
// waits for the writer.
func (h *Handle) CloseSlot(n int) error {
	done := make(chan slotResult, 1)
	h.sys.Send(h.pid, &slotOp{n: n, done: done})
	r, _ := system.Await(context.Background(), done)
	return r.err
}

// slotOp opens or closes one slot.
type slotOp struct {
	open  bool
	n     int
	owner slotlog.Owner
	done  chan slotResult
}

type slotResult struct {
	loaded []Loaded
	err    error
}

// Fail answers an operation whose handling panicked.
func (o *slotOp) Fail(reason any) {
	o.done <- slotResult{err: fmt.Errorf("offsets writer failed: %v", reason)}
}

// Append hands an append to the writer.
func (h *Handle) Append(a *Append) { h.sys.Send(h.pid, a) }

// Stop stops the writer after what is queued; it fsyncs and closes the
// logs. It returns why that failed for any slot (a slot offline after a
// disk error): then not everything written is durable.
func (h *Handle) Stop() error {
	h.sys.Stop(h.pid)
	return h.closeErr
}

// writer is the offsets' Kind of slot writer: its appends and slot
// operations, run inside the slotwriter actor.
type writer struct {
	dir    *offsetlog.Dir
	log    *slog.Logger
	handle *Handle
}

// Receive handles the offsets' own messages.
func (w *writer) Receive(sw *slotwriter.Writer, msg any) bool {
	switch m := msg.(type) {
	case *Append:
		w.append(sw, m)
	case *slotOp:
		if !m.open {
			// Every append to the slot is answered before it closes.
			if s, err := w.dir.Slot(m.n); err == nil {
				sw.Release(s.Log())
			}
			w.handle.unpublish(m.n)
			m.done <- slotResult{err: w.dir.Release(m.n)}
			return true
		}
		s, err := w.dir.Claim(m.n, m.owner)
		if err != nil {
			m.done <- slotResult{err: err}
			return true
		}
		w.handle.publish(s)
		m.done <- slotResult{loaded: loadedOf(s)}
	default:
		return false
	}
	return true
}

// Stopping closes the logs once every append is answered.
func (w *writer) Stopping() {
	for n := range w.handle.views {
		w.handle.unpublish(n)
	}
	var errs []error
	for _, s := range w.dir.Existing() {
		if err := s.Failed(); err != nil {
			errs = append(errs, fmt.Errorf("offsets slot %d: %w", s.Num, err))
		}
	}
	errs = append(errs, w.dir.Close())
	if err := errors.Join(errs...); err != nil {
		w.log.Error("closing offsets logs: not everything written is durable", "err", err)
		w.handle.closeErr = err
	}
}

func (w *writer) append(sw *slotwriter.Writer, m *Append) {
	storageError := func(err error) {
		w.log.Error("offsets log unavailable; answering KAFKA_STORAGE_ERROR", "slot", m.Slot, "err", err)
		m.Reply(Result{Code: kerr.KafkaStorageError.Code})
	}
	if alive := w.handle.alive; alive != nil && !alive(m.Slot) {
		w.log.Warn("offsets write refused: the cluster lease is not certainly alive", "slot", m.Slot)
		m.Reply(Result{Code: kerr.NotCoordinator.Code})
		return
	}
	s, err := w.dir.Slot(m.Slot)
	if errors.Is(err, offsetlog.ErrNotOwned) {
		// Handed to another broker: the caller finds the new coordinator.
		m.Reply(Result{Code: kerr.NotCoordinator.Code})
		return
	}
	if err != nil {
		storageError(err)
		return
	}
	if err := s.Failed(); err != nil {
		storageError(err)
		return
	}
	w.handle.publish(s)
	var res Result
	switch m.Entry.Kind {
	case offsetlog.KindTxn, offsetlog.KindCommit, offsetlog.KindAbort:
		if last, ok := s.State().Epochs[m.Entry.ProducerID]; ok && m.Entry.Epoch < last {
			w.log.Info("rejecting an offsets entry from an old producer epoch", "kind", m.Entry.Kind,
				"producer_id", m.Entry.ProducerID, "epoch", m.Entry.Epoch, "last_epoch", last, "slot", m.Slot)
			m.Reply(Result{Code: kerr.InvalidProducerEpoch.Code})
			return
		}
		if m.Entry.Kind != offsetlog.KindTxn {
			res.Groups = s.State().GroupsPendingFor(m.Entry.ProducerID)
		}
	}
	first, err := s.Append(&m.Entry)
	if err != nil {
		storageError(err)
		return
	}
	res.FirstSeq = first
	sw.Wait(s, s.Log(), func(err error) {
		switch {
		case err != nil:
			// The failure is final for the slot (slotlog logs and counts it).
			res = Result{Code: kerr.KafkaStorageError.Code}
		case w.handle.alive != nil && !w.handle.alive(m.Slot):
			// Durable, but a peer may have sealed the slot before it got
			// there: not acknowledged (the client retries elsewhere).
			res.Code, res.Durable = kerr.NotCoordinator.Code, true
		default:
			// Durable while the lease held: readers of the slot's
			// view may see it now.
			s.Durable(first)
		}
		m.Reply(res)
	})
}

// Summary is what the inspector shows for the writer.
type Summary struct {
	Slots []SlotSummary `json:"slots"`
}

// SlotSummary is one slot log.
type SlotSummary struct {
	Slot      int    `json:"slot"`
	SizeBytes int64  `json:"size_bytes"`
	Groups    int    `json:"groups"`
	Producers int    `json:"producers_with_epochs"`
	Failed    string `json:"failed,omitempty"`
}

// Summary is what the inspector shows: each slot's log.
func (w *writer) Summary() any {
	var s Summary
	for _, sl := range w.dir.Existing() {
		ss := SlotSummary{Slot: sl.Num, SizeBytes: sl.Size(), Groups: len(sl.State().Groups), Producers: len(sl.State().Epochs)}
		if err := sl.Failed(); err != nil {
			ss.Failed = err.Error()
		}
		s.Slots = append(s.Slots, ss)
	}
	return s
}
