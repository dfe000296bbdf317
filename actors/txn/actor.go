package txn

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/metrics/events"
	"kaas/model/txnstate"
	"kaas/state/txncoord"
)

// txnActor owns one transactional id's coordinator state machine
// (state/txncoord). It turns messages into calls on the machine and
// carries out the Steps it returns: writes to the store, fences, markers,
// timers and replies, each of which reports back as a message. It holds
// requests back while a write is outstanding, so each request sees every
// earlier transition durable (or failed), exactly as when writes blocked
// the actor; while a transition waits on a fence or markers (an end, a
// rejoin's or the reaper's abort, a resumed Prepare*), the requests that
// need them done — InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn — wait too, each until its deadline (txncoord.Waiting: the
// request's own timeout, else Config.MarkerWait), and only then get
// CONCURRENT_TRANSACTIONS (R-TXN-2): the client's retry and backoff are
// saved.
type txnActor struct {
	c    *Coordinator
	id   string
	self *actor.PID // from Started
	pid  *actor.PID // from the spawner, for the pool
	t    *txncoord.Txn
	held txncoord.Waiting // requests that wait for a write, or for a transition's markers
	// holdArmed is when the hold timer next fires (zero: not armed): at
	// the earliest deadline of a request waiting for markers.
	holdArmed time.Time
	// completeTimer is the pending timer of the machine's Complete* tick
	// (nil: none), completeGen its generation: see armComplete.
	completeTimer *time.Timer
	completeGen   uint64

	outbox []*txncoord.Answer // replies sent once the summary is published

	retiring bool // asked the pool to retire it (passivation)

	lastActive atomic.Int64 // unix nanos, read by passivation
	summary    atomic.Pointer[published]
}

// Internal messages: from its timer and the coordinator (held back while
// a write is outstanding, as requests are) ...
type (
	reapTick      struct{}
	expireTick    struct{ now time.Time }
	resumeMarkers struct{}
	holdTick      struct{} // a held request's deadline may have come
	// completeTick is the machine's Complete* Tick from completeTimer
	// of generation gen.
	completeTick struct{ gen uint64 }
)

// ... and outcomes of the effects it started (never held back).
type (
	persisted struct {
		err   error
		state txnstate.State
	}
	// unconfirmed is the outcome of a write nothing waits for (Complete*).
	unconfirmed struct{ err error }
	fenced      struct{ err error }
	endFenced   struct {
		seq int
		err error
	}
	markerDone struct {
		round int
		key   txncoord.MarkerKey
		code  int16
	}
)

func (a *txnActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case reapTick, system.RetireRequest:
	default:
		a.touch() // activity: anything but its own timer and the pool
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self = c.Self()
	case *actor.Stopping:
		// Only at shutdown: the server has answered its calls already.
		for _, msg := range a.held.Drain() {
			a.reply(msg, kerr.CoordinatorNotAvailable.Code)
		}
		if e, due := a.t.CompleteDue(); due {
			// Its tick will not come. Best effort: the writer stops
			// after the coordinator and writes it; a slot already
			// closed refuses it, and its next owner sends the Prepare*
			// entry's markers again (txncoord's complete).
			a.c.cfg.Store.PersistLazily(e, func(error) {})
		}
	case *actor.Stopped, *actor.Restarting:
	case holdTick:
		a.holdArmed = time.Time{}
		a.expireHeld(a.now())
	default:
		a.handle(m)
		for msg, ok := a.held.Ready(a.t); ok; msg, ok = a.held.Ready(a.t) {
			a.replay(msg)
		}
		a.armHoldTimer()
		a.dropCoveredComplete()
	}
	a.publish()
	out := a.outbox
	a.outbox = nil
	for _, ans := range out {
		answer(ans)
	}
}

// handle feeds one message to the machine and carries out its Step.
func (a *txnActor) handle(msg any) {
	now := a.now()
	if heldBack(msg) && a.t.MustWait(waitsForMarkers(msg)) {
		a.held.Hold(msg, waitsForMarkers(msg), txncoord.WaitDeadline(now, ownDeadline(msg), a.c.cfg.MarkerWait))
		return
	}
	var s txncoord.Step
	switch m := msg.(type) {
	case *messages.InitProducerID:
		s = a.t.InitProducerID(m, txncoord.InitProducerID{TimeoutMs: m.TimeoutMs, HasClaim: m.HasClaim,
			ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch}, now, a.c.cfg.PIDs)
	case *messages.AddPartitionsToTxn:
		s = a.t.AddPartitions(m, txncoord.AddPartitions{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
			Partitions: m.Partitions, VerifyOnly: m.VerifyOnly, TV2: m.TV2}, now)
	case *messages.AddOffsetsToTxn:
		s = a.t.AddOffsets(m, txncoord.AddOffsets{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Group: m.Group, TV2: m.TV2}, now)
	case *messages.EndTxn:
		s = a.t.EndTxn(m, txncoord.EndTxn{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit, TV2: m.TV2}, now, a.c.cfg.PIDs)
	case reapTick:
		s = a.t.Reap(now)
		defer a.passivateIfIdle(now)
	case expireTick:
		s = a.t.Expire(m.now, a.c.cfg.Expiration)
	case resumeMarkers:
		s = a.t.Resume(now)
	case system.RetireRequest:
		a.retiring = false
		m.Reply(a.t.Stable())
		return
	case persisted:
		if m.err != nil {
			a.c.log.Error("persisting transaction state failed", "transactional_id", a.id, "state", m.state.String(), "err", m.err)
		}
		s = a.t.PersistDone(m.err, now)
	case unconfirmed:
		s = a.t.UnconfirmedDone(m.err)
	case fenced:
		s = a.t.FenceDone(m.err, now)
	case endFenced:
		s = a.t.EndFenceDone(m.seq, m.err)
	case markerDone:
		s = a.t.MarkerDone(m.round, m.key, m.code, now)
	case txncoord.Tick:
		s = a.t.Fire(m, now)
	case completeTick:
		if m.gen == a.completeGen {
			a.completeTimer = nil
		}
		s = a.t.Fire(txncoord.Tick{Complete: true}, now)
	default:
		a.c.log.Warn("transactional id actor got an unknown message", "type", fmt.Sprintf("%T", m))
		return
	}
	a.do(s)
}

// heldBack reports the messages that wait for an outstanding write:
// everything but the outcomes of effects.
func heldBack(msg any) bool {
	switch msg.(type) {
	case persisted, unconfirmed, fenced, endFenced, markerDone, txncoord.Tick, completeTick, holdTick:
		return false
	}
	return true
}

// waitsForMarkers are the requests that need the transition in flight
// finished (R-TXN-2); a verification (R-TXN-5) does not.
func waitsForMarkers(msg any) bool {
	switch m := msg.(type) {
	case *messages.InitProducerID, *messages.AddOffsetsToTxn, *messages.EndTxn:
		return true
	case *messages.AddPartitionsToTxn:
		return !m.VerifyOnly
	}
	return false
}

// ownDeadline is the deadline a request carries (zero: none, the
// coordinator's MarkerWait bounds its wait).
func ownDeadline(msg any) time.Time {
	if m, ok := msg.(*messages.AddPartitionsToTxn); ok {
		return m.Deadline
	}
	return time.Time{}
}

// armHoldTimer arranges a holdTick at the earliest deadline of a request
// waiting for markers, unless one is due by then already. Not while a
// write is outstanding: nothing expires then, and a deadline already
// gone would spin the timer; the write's outcome is a message, after
// which Receive arms it again. (A tick armed for a later deadline that
// has since been answered only makes expireHeld look again.)
func (a *txnActor) armHoldTimer() {
	d, ok := a.held.Deadline()
	if !ok || a.self == nil || a.t.Persisting() || (!a.holdArmed.IsZero() && !d.Before(a.holdArmed)) {
		return
	}
	a.holdArmed = d
	self, sys := a.self, a.c.sys
	time.AfterFunc(max(d.Sub(a.now()), 0), func() { sys.Send(self, holdTick{}) })
}

// expireHeld answers CONCURRENT_TRANSACTIONS to every request whose
// deadline came while it waited for a transition's markers (R-TXN-2);
// requests waiting for a write keep waiting (a write always completes).
func (a *txnActor) expireHeld(now time.Time) {
	for _, msg := range a.held.Expired(a.t, now) {
		a.c.log.Info("request waited for the transaction's markers until its deadline", "transactional_id", a.id,
			"request", fmt.Sprintf("%T", msg))
		a.reply(msg, kerr.ConcurrentTransactions.Code)
	}
	a.armHoldTimer()
}

// replay handles a held message; a panic answers it (as the actor
// system does for the message being received).
func (a *txnActor) replay(msg any) {
	defer func() {
		if r := recover(); r != nil {
			a.c.log.Error("transactional id actor panicked handling a held message", "transactional_id", a.id,
				"message", fmt.Sprintf("%T", msg), "panic", r)
			if f, ok := msg.(interface{ Fail(reason any) }); ok {
				f.Fail(r)
			}
		}
	}()
	a.handle(msg)
}

// do carries out a Step in its order: fence, write, markers, timer,
// answer (after the summary is published).
func (a *txnActor) do(s txncoord.Step) {
	for _, ev := range s.Events {
		a.count(ev)
	}
	if b := s.Bump; b != nil {
		e := events.Event{Kind: events.EpochBump, ProducerID: b.ProducerID, Epoch: b.Epoch, PrevEpoch: b.PrevEpoch,
			Reason: string(b.Reason), TransactionalID: a.id}
		if b.PrevProducerID != b.ProducerID {
			e.PrevProducerID = b.PrevProducerID
		}
		a.c.cfg.Metrics.Events.Record(e)
	}
	self, sys := a.self, a.c.sys
	if f := s.Fence; f != nil {
		a.c.cfg.Fencer.Fence(f.ProducerID, f.Epoch, func(err error) { sys.Send(self, fenced{err: err}) })
	}
	if f := s.EndFence; f != nil && a.c.cfg.EndFencer != nil {
		// Without an EndFencer the fence never completes: the end is
		// answered after its markers.
		seq := f.Seq
		a.c.cfg.EndFencer.FenceEnd(f.ProducerID, f.Epoch, f.Partitions, func(err error) { sys.Send(self, endFenced{seq: seq, err: err}) })
	}
	if f := s.EndFenceDrop; f != nil && a.c.cfg.EndFencer != nil {
		a.c.cfg.EndFencer.DropEnd(f.ProducerID, f.Epoch)
	}
	if e := s.Persist; e != nil && s.Unconfirmed {
		a.c.cfg.Store.PersistLazily(*e, func(err error) { sys.Send(self, unconfirmed{err: err}) })
	} else if e != nil {
		state := e.State
		a.c.cfg.Store.Persist(*e, func(err error) { sys.Send(self, persisted{err: err, state: state}) })
	}
	if s.Delete {
		a.c.cfg.Store.Remove(a.id, func(err error) { sys.Send(self, persisted{err: err, state: txnstate.Dead}) })
	}
	for _, m := range s.Markers {
		a.sendMarker(m)
	}
	if l := s.Later; l != nil && l.Tick.Complete {
		a.armComplete(l.After)
	} else if l != nil {
		tick := l.Tick
		time.AfterFunc(l.After, func() { sys.Send(self, tick) })
	}
	if s.Answer != nil {
		a.outbox = append(a.outbox, s.Answer)
	}
}

// armComplete starts the timer of the machine's Complete* tick (Step.Later
// with Tick.Complete), replacing one still pending.
//
// Why not a plain AfterFunc: the tick is almost never needed. The
// producer's next transition writes a whole entry within CompleteDelay
// and covers the Complete*, and dropCoveredComplete then stops the timer;
// fired, it cost a goroutine (AfterFunc's), a message and a wake-up of
// this actor per transaction for nothing — at 32 producers with
// --flush-interval-ms 0.65 timers per transaction fired (a producer's
// transactions come ~14 ms apart there, longer than CompleteDelay, so
// each one armed its own).
func (a *txnActor) armComplete(after time.Duration) {
	if a.completeTimer != nil {
		a.completeTimer.Stop() // if it already fired, its tick is a stale generation
	}
	a.completeGen++
	gen, self, sys := a.completeGen, a.self, a.c.sys
	a.completeTimer = time.AfterFunc(after, func() { sys.Send(self, completeTick{gen: gen}) })
}

// dropCoveredComplete stops the Complete* timer once a later transition's
// write has covered the entry (no Complete* is due any more) and hands the
// machine its tick now, which finds nothing to write and disarms it, as
// the timer's would have. A timer that fired already delivers its own.
func (a *txnActor) dropCoveredComplete() {
	if a.completeTimer == nil {
		return
	}
	if _, due := a.t.CompleteDue(); due || !a.completeTimer.Stop() {
		return
	}
	a.completeTimer = nil
	a.do(a.t.Fire(txncoord.Tick{Complete: true}, a.now()))
}

// sendMarker delivers one marker of a round (R-MRK-1); its answer comes
// back as markerDone.
func (a *txnActor) sendMarker(m txncoord.Marker) {
	self, sys := a.self, a.c.sys
	round, key := m.Round, m.Key
	reply := func(code int16) { sys.Send(self, markerDone{round: round, key: key, code: code}) }
	if key.Groups {
		a.c.cfg.Markers.CompleteTxnOffsets(m.ProducerID, m.Epoch, m.Commit, m.Groups, m.Slots, reply)
		return
	}
	wm := &messages.WriteMarker{
		ProducerID: m.ProducerID, ProducerEpoch: m.Epoch, Commit: m.Commit,
		CoordinatorEpoch: a.c.cfg.Store.CoordinatorEpoch(a.id), Reply: reply,
	}
	if !a.c.cfg.Markers.WriteMarker(key.TP, wm) {
		reply(0) // the topic was deleted: there is nothing left to mark
	}
}

func (a *txnActor) count(ev txncoord.Event) {
	m := a.c.cfg.Metrics
	switch ev {
	case txncoord.EpochBump:
		m.EpochBumps.Inc()
	case txncoord.EpochRotation:
		m.EpochRotations.Inc()
	case txncoord.Committed:
		m.TxnCommits.Inc()
	case txncoord.Aborted:
		m.TxnAborts.Inc()
	case txncoord.ReaperAbort:
		m.TxnReaperAborts.Inc()
	case txncoord.EarlyEnd:
		m.TxnEarlyEnds.Inc()
	case txncoord.EndFenceFailed:
		m.TxnEndFenceFailures.Inc()
	}
}

// answer sends a machine's answer to the request it is for.
func answer(ans *txncoord.Answer) {
	switch m := ans.To.(type) {
	case *messages.InitProducerID:
		m.Reply(ans.Code, ans.ProducerID, ans.Epoch)
	case *messages.AddPartitionsToTxn:
		m.Reply(ans.Code, ans.Partitions)
	case *messages.AddOffsetsToTxn:
		m.Reply(ans.Code)
	case *messages.EndTxn:
		m.Reply(ans.Code, ans.ProducerID, ans.Epoch)
	}
}

// reply answers a request message with an error code (a retirement: no).
func (a *txnActor) reply(msg any, code int16) {
	switch m := msg.(type) {
	case system.RetireRequest:
		m.Reply(false)
	default:
		answer(&txncoord.Answer{To: msg, Code: code, ProducerID: -1, Epoch: -1})
	}
}

func (a *txnActor) now() time.Time { return a.c.cfg.Now() }

// PID is the actor's address (system.Addressed).
func (a *txnActor) PID() *actor.PID { return a.pid }

func (a *txnActor) touch() { a.lastActive.Store(time.Now().UnixNano()) }

// passivateIfIdle asks the pool to stop this actor once it has had no
// work for IdleActor and its entry can be left to the store (Stable); the
// pool then asks it again (RetireRequest) after any message already on
// its way, and a fresh actor is spawned from the store when the id is
// next used.
func (a *txnActor) passivateIfIdle(now time.Time) {
	idle := now.Sub(time.Unix(0, a.lastActive.Load()))
	if idle > a.c.cfg.IdleActor && a.t.Stable() && !a.retiring {
		a.retiring = a.c.pool.Retire(a.id, a)
	}
}
