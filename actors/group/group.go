// Package group is the group actor: one per consumer group, the only owner
// of its state/consumergroup state machine. Requests, timer expiries and offsets
// log results all arrive as messages, so the state machine runs on one
// goroutine at a time without locks. Replies are sent after the group's
// summary is republished, so a client that got an answer never sees an
// older state in ListGroups or the inspector.
package group

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/offsetwriter"
	"kaas/actors/system"
	"kaas/messages"
	"kaas/model"
	"kaas/state/consumergroup"
	"kaas/storage/offsetlog"
)

// Observer receives the group's measurements.
type Observer interface {
	// StateChanged reports a change of the group's type or state (from
	// the zero Kind when the group appears, to it when it goes away).
	StateChanged(from, to Kind)
	RebalanceStarted()
	// OffsetsCommitted counts offsets made durable by plain commits.
	OffsetsCommitted(n int)
}

// Kind is what a group is for its metrics: its type, "classic" or
// "consumer" (KIP-848; a group can convert between the two), and its
// state, whose names depend on the type.
type Kind struct{ Type, State string }

// Config is what a group actor needs.
type Config struct {
	ID      string
	Slot    int
	Groups  consumergroup.Config
	Offsets *offsetwriter.Handle
	// Loaded is the group's recovered state, or nil for a new group.
	Loaded   *offsetlog.GroupState
	Observer Observer
	Logger   *slog.Logger
	// Retire is called (from the actor) once the group is Dead and has
	// no write in flight: the broker retires it through its pool, which
	// asks it again (system.RetireRequest) before stopping it.
	Retire func(*Handle)
	// Topics is the broker's current topics (consumer groups'
	// subscriptions); read from the actor, so it must be safe to call
	// from any goroutine.
	Topics func() consumergroup.TopicsImage
	// ConsumerTimeouts is the group's consumer.* configs in force (its
	// own, else the broker's), read when the group starts and before each
	// consumer heartbeat as Apache reads them; safe from any goroutine.
	// Nil: the broker's Groups values.
	ConsumerTimeouts func(group string) consumergroup.ConsumerTimeouts
}

// Handle is how the broker reaches a group actor.
type Handle struct {
	ID      string
	Slot    int
	pid     *actor.PID
	sys     *system.System
	summary atomic.Pointer[consumergroup.Summary]
}

// Send delivers a message to the group actor.
func (h *Handle) Send(msg any) { h.sys.Send(h.pid, msg) }

// Stop stops the actor after the messages already queued, and waits.
func (h *Handle) Stop() { h.sys.Stop(h.pid) }

// PID is the actor's address.
func (h *Handle) PID() *actor.PID { return h.pid }

// Summary is the group as it stood after the last message it handled.
func (h *Handle) Summary() *consumergroup.Summary { return h.summary.Load() }

// Spawn starts the actor for cfg.ID as group/<id>.
func Spawn(sys *system.System, cfg Config) (*Handle, error) {
	h := &Handle{ID: cfg.ID, Slot: cfg.Slot, sys: sys}
	a := &groupActor{cfg: cfg, h: h, sys: sys, timers: map[*timer]struct{}{}, log: cfg.Logger.With("group", cfg.ID)}
	// Publish before the actor runs so the group is never listed without
	// a summary.
	h.summary.Store(&consumergroup.Summary{Group: cfg.ID, State: consumergroup.Empty.String()})
	pid, err := sys.Spawn("group", cfg.ID, a, func(*actor.PID) any { return h.Summary() })
	if err != nil {
		return nil, err
	}
	h.pid = pid
	return h, nil
}

type groupActor struct {
	cfg  Config
	h    *Handle
	sys  *system.System
	self *actor.PID
	log  *slog.Logger
	g    *consumergroup.Group

	timers   map[*timer]struct{}
	inflight int      // offsets log writes not yet answered
	outbox   []func() // replies to send once the summary is published
	kind     Kind     // last type and state reported to the observer
	retired  bool
	// unloaded: UnloadGroup came (slot handed off, broker stopping);
	// requests are answered NOT_COORDINATOR from then on.
	unloaded bool
}

type timer struct {
	t *time.Timer
}

// timerFired carries an expired timer into the mailbox.
type timerFired struct {
	h *timer
	t consumergroup.Timer
}

// persisted carries an offsets log result into the mailbox.
type persisted struct {
	res  offsetwriter.Result
	done func(int16, uint64)
}

func (a *groupActor) Receive(c actor.Context) {
	if u, ok := c.Message().(system.Undeliverable); ok && a.unloaded {
		// Unloaded (its slot handed off, or the broker stopping): the
		// client finds the coordinator again.
		u.NotLeader()
		return
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self = c.Self()
		groups := a.cfg.Groups.WithConsumerTimeouts(a.consumerTimeouts())
		if a.cfg.Loaded != nil {
			a.g = consumergroup.Load(a.cfg.ID, groups, a, a.log, a.cfg.Loaded)
			a.cfg.Loaded = nil
		} else {
			a.g = consumergroup.New(a.cfg.ID, groups, a, a.log)
		}
	case *actor.Stopping:
		for t := range a.timers {
			t.t.Stop()
		}
		clear(a.timers)
		if a.kind != (Kind{}) && a.cfg.Observer != nil {
			a.cfg.Observer.StateChanged(a.kind, Kind{})
		}
		a.kind = Kind{}
		return
	case *actor.Stopped, *actor.Restarting:
		return
	case *messages.JoinGroup:
		a.g.Join(m.Request, deferred(a, m.Reply))
	case *messages.SyncGroup:
		a.g.Sync(m.Request, deferred(a, m.Reply))
	case *messages.Heartbeat:
		code := a.g.Heartbeat(m.Request)
		a.later(func() { m.Reply(code) })
	case *messages.LeaveGroup:
		a.g.Leave(m.Members, func(code int16, res []consumergroup.LeaveResult) {
			a.later(func() { m.Reply(code, res) })
		})
	case *messages.CommitOffsets:
		reply := deferred(a, m.Reply)
		if m.Transactional {
			a.g.CommitTxnOffsets(m.Request, reply)
		} else {
			a.g.CommitOffsets(m.Request, reply)
		}
	case *messages.FetchOffsets:
		if code := a.g.ValidateOffsetFetch(m.MemberID, m.MemberEpoch); code != 0 {
			a.later(func() { m.Reply(code, nil) })
			break
		}
		res := a.g.FetchOffsets(m.Partitions, m.RequireStable)
		a.later(func() { m.Reply(0, res) })
	case *messages.ConsumerHeartbeat:
		a.g.SetConsumerTimeouts(a.consumerTimeouts())
		a.g.ConsumerHeartbeat(m.Request, deferred(a, m.Reply))
	case *messages.ConsumerDescribe:
		d := a.g.ConsumerDescribe()
		a.later(func() { m.Reply(d) })
	case messages.TopicsChanged:
		a.g.TopicsChanged(m.Created)
	case *messages.DescribeGroup:
		d := a.g.Describe()
		a.later(func() { m.Reply(d) })
	case *messages.DeleteGroup:
		a.g.Delete(deferred(a, m.Reply))
	case *messages.DeleteOffsets:
		reply := m.Reply
		a.g.DeleteOffsets(m.Partitions, func(code int16, codes map[model.TopicPartition]int16) {
			a.later(func() { reply(code, codes) })
		})
	case messages.ExpireOffsets:
		a.g.ExpireOffsets(func() {})
	case *messages.RemovePartitions:
		a.g.RemovePartitions(m.Partitions)
	case *messages.CompleteTxn:
		a.g.CompleteTxn(m.ProducerID, m.Commit)
		if m.Done != nil {
			a.later(m.Done)
		}
	case system.RetireRequest:
		// Still Dead with nothing in flight: it may go. Otherwise it asks
		// again once it is.
		ok := a.g.State() == consumergroup.Dead && a.inflight == 0
		a.retired = ok
		m.Reply(ok)
		return
	case *messages.UnloadGroup:
		a.g.Unload()
		a.unloaded = true
		a.retired = true // the broker stops every group itself
		a.later(m.Done)
	case timerFired:
		if _, live := a.timers[m.h]; live {
			delete(a.timers, m.h)
			a.g.Fire(m.t)
		}
	case persisted:
		a.inflight--
		m.done(m.res.Code, m.res.FirstSeq)
	default:
		a.log.Warn("group actor got an unknown message", "type", fmt.Sprintf("%T", m))
		return
	}
	a.afterMessage()
}

// later queues fn to run once the message is handled and the summary
// published.
func (a *groupActor) later(fn func()) { a.outbox = append(a.outbox, fn) }

// deferred wraps a reply so it runs after the summary is published.
func deferred[T any](a *groupActor, reply func(T)) func(T) {
	return func(v T) { a.later(func() { reply(v) }) }
}

func (a *groupActor) afterMessage() {
	s := a.g.Summarize()
	a.h.summary.Store(s)
	if k := (Kind{Type: s.Type, State: s.State}); k != a.kind {
		if a.cfg.Observer != nil {
			a.cfg.Observer.StateChanged(a.kind, k)
		}
		a.kind = k
	}
	out := a.outbox
	a.outbox = nil
	for _, fn := range out {
		fn()
	}
	if a.g.State() == consumergroup.Dead && a.inflight == 0 && !a.retired {
		a.retired = true
		if a.cfg.Retire != nil {
			a.cfg.Retire(a.h)
		}
	}
}

// Now implements consumergroup.Env.
func (a *groupActor) Now() time.Time { return time.Now() }

// Schedule implements consumergroup.Env with a timer that posts to the mailbox.
func (a *groupActor) Schedule(d time.Duration, t consumergroup.Timer) func() {
	h := &timer{}
	a.timers[h] = struct{}{}
	self, sys := a.self, a.sys
	h.t = time.AfterFunc(d, func() { sys.Send(self, timerFired{h: h, t: t}) })
	return func() {
		h.t.Stop()
		delete(a.timers, h)
	}
}

// Persist implements consumergroup.Env through the offsets writer.
func (a *groupActor) Persist(e offsetlog.Entry, done func(int16, uint64)) {
	a.inflight++
	self, sys := a.self, a.sys
	if e.Kind == offsetlog.KindPlain && a.cfg.Observer != nil {
		n, obs := countOffsetRecords(e), a.cfg.Observer
		inner := done
		done = func(code int16, seq uint64) {
			if code == 0 && n > 0 {
				obs.OffsetsCommitted(n)
			}
			inner(code, seq)
		}
	}
	a.cfg.Offsets.Append(&offsetwriter.Append{Slot: a.cfg.Slot, Entry: e, Reply: func(r offsetwriter.Result) {
		sys.Send(self, persisted{res: r, done: done})
	}})
}

// consumerTimeouts is the group's consumer.* configs now (zero: keep the
// broker's).
func (a *groupActor) consumerTimeouts() consumergroup.ConsumerTimeouts {
	if a.cfg.ConsumerTimeouts == nil {
		return consumergroup.ConsumerTimeouts{}
	}
	return a.cfg.ConsumerTimeouts(a.cfg.ID)
}

// Topics implements consumergroup.Env.
func (a *groupActor) Topics() consumergroup.TopicsImage { return a.cfg.Topics() }

// RebalanceStarted implements consumergroup.Env.
func (a *groupActor) RebalanceStarted() {
	if a.cfg.Observer != nil {
		a.cfg.Observer.RebalanceStarted()
	}
}

// countOffsetRecords counts offset commits (not tombstones or group
// metadata) in a plain entry.
func countOffsetRecords(e offsetlog.Entry) int {
	n := 0
	for _, r := range e.Records {
		if r.Value != nil && len(r.Key) >= 2 && r.Key[0] == 0 && r.Key[1] <= 1 {
			n++
		}
	}
	return n
}
