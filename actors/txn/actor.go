package txn

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/txnlog"
)

// txnActor owns one transactional id's coordinator entry. Every transition
// is persisted before it is answered or acted on. While a transition waits
// on markers or a fence it is "in flight" (R-TXN-2) and other requests get
// CONCURRENT_TRANSACTIONS; the actor keeps taking messages meanwhile.
type txnActor struct {
	c         *Coordinator
	id        string
	self      *actor.PID
	entry     txnlog.Entry
	persisted bool // entry exists in the store (false: allocated in memory only)

	inflight bool
	// failedFence (R-IPI-14): persisting a fence transition failed; the
	// entry's epoch counts as fenceEpoch for client checks while Ongoing,
	// and the next fence attempt reuses it.
	failedFence bool
	fenceEpoch  int16

	markers markerRound

	lastActive atomic.Int64 // unix nanos, read by passivation
	summary    atomic.Pointer[Summary]
}

// Internal messages.
type (
	reapTick      struct{ now time.Time }
	resumeMarkers struct{}
	fenceDone     struct {
		err  error
		then func(error)
	}
	markerDone struct {
		round int
		key   markerKey
		code  int16
	}
	retryMarker struct {
		round int
		key   markerKey
	}
	retryComplete struct{ round int }
)

func (a *txnActor) Receive(c actor.Context) {
	a.touch()
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self = c.Self()
	case *messages.InitProducerID:
		a.initProducerID(m)
	case *messages.AddPartitionsToTxn:
		a.addPartitions(m)
	case *messages.AddOffsetsToTxn:
		a.addOffsets(m)
	case *messages.EndTxn:
		a.endTxn(m)
	case reapTick:
		a.reap(m.now)
	case passivate:
		m.done(a.stable())
	case resumeMarkers:
		if a.entry.State.IsPrepare() && !a.inflight {
			a.inflight = true
			a.writeMarkers(a.entry.State == txnlog.PrepareCommit, func() {})
		}
	case fenceDone:
		m.then(m.err)
	case markerDone:
		a.markerDone(m)
	case retryMarker:
		a.resendMarker(m)
	case retryComplete:
		if m.round == a.markers.round {
			a.completeMarkers()
		}
	}
	a.publish()
}

func (a *txnActor) now() time.Time { return time.Now() }

func (a *txnActor) touch() { a.lastActive.Store(time.Now().UnixNano()) }

func (a *txnActor) idleSince(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, a.lastActive.Load()))
}

// passivate asks an idle actor whether it may stop.
type passivate struct{ done func(ok bool) }

// stable reports whether the entry can be left to the store alone: no
// transition in flight and nothing the reaper or a resume must watch.
func (a *txnActor) stable() bool {
	if a.inflight {
		return false
	}
	s := a.entry.State
	return !a.persisted || s == txnlog.Empty || s.IsComplete()
}

// persist makes next the entry if it is durably stored (R-GEN-3: on
// failure the entry stays as it was and the caller answers
// COORDINATOR_NOT_AVAILABLE).
func (a *txnActor) persist(next txnlog.Entry) bool {
	next.LastUpdateMs = a.now().UnixMilli()
	if err := a.c.cfg.Store.Put(next); err != nil {
		a.c.log.Error("persisting transaction state failed", "transactional_id", a.id, "state", next.State.String(), "err", err)
		return false
	}
	a.entry = next
	a.persisted = true
	a.publish()
	return true
}

// fence runs the fence broadcaster and continues with then on this actor.
func (a *txnActor) fence(epoch int16, then func(error)) {
	self, sys := a.self, a.c.sys
	a.c.cfg.Fencer.Fence(a.entry.ProducerID, epoch, func(err error) {
		sys.Send(self, fenceDone{err: err, then: then})
	})
}

// clientEpoch is the epoch client requests are checked against: the
// failed fence's epoch while an Ongoing entry has one (R-IPI-14).
func (a *txnActor) clientEpoch() int16 {
	if a.failedFence && a.entry.State == txnlog.Ongoing {
		return a.fenceEpoch
	}
	return a.entry.Epoch
}

// checkProducer is the common PID/epoch check of the transaction APIs:
// INVALID_PRODUCER_ID_MAPPING, then PRODUCER_FENCED (the handler maps it
// to INVALID_PRODUCER_EPOCH for old versions).
func (a *txnActor) checkProducer(pid int64, epoch int16) int16 {
	if !a.persisted || pid != a.entry.ProducerID {
		return kerr.InvalidProducerIDMapping.Code
	}
	if epoch != a.clientEpoch() {
		return kerr.ProducerFenced.Code
	}
	return 0
}

// fenceAbort is R-IPI-10 steps 1–3 and 5 (rejoin while Ongoing) and
// R-TXN-9 (timeout): PrepareAbort at a bumped epoch, fence it, ABORT
// markers at that epoch, CompleteAbort. done gets the fence's error, if
// any, once CompleteAbort is durable — or the persist failure at once.
func (a *txnActor) fenceAbort(done func(code int16)) {
	f := a.entry.Epoch + 1
	if a.failedFence {
		f = a.fenceEpoch
	}
	next := a.entry.Clone()
	next.Epoch, next.LastEpoch, next.State = f, -1, txnlog.PrepareAbort
	if !a.persist(next) {
		a.failedFence, a.fenceEpoch = true, f
		done(kerr.CoordinatorNotAvailable.Code)
		return
	}
	a.failedFence = false
	a.inflight = true
	a.c.cfg.Metrics.EpochBumps.Inc()
	a.fence(f, func(err error) {
		code := int16(0)
		if err != nil {
			code = kerr.CoordinatorNotAvailable.Code
		}
		// The markers go out whatever the fence file did: PrepareAbort is
		// durable and must complete (R-TXN-3).
		a.writeMarkers(false, func() { done(code) })
	})
}

func (a *txnActor) reap(now time.Time) {
	e := &a.entry
	if e.State != txnlog.Ongoing || a.inflight || e.TxnStartMs+int64(e.TimeoutMs) >= now.UnixMilli() {
		return
	}
	a.c.log.Info("aborting a transaction past its timeout", "transactional_id", a.id,
		"producer_id", e.ProducerID, "epoch", e.Epoch, "timeout_ms", e.TimeoutMs)
	a.c.cfg.Metrics.TxnReaperAborts.Inc()
	a.fenceAbort(func(int16) {})
}
