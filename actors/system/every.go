package system

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Every's registrations of one period share a wheel: one timer ticks
// through slots, and each tick sends to the registrations of one slot, so
// each is served once per period. A timer per registration (as before)
// cost about 220 bytes and a runtime timer for each of 100,000 idle
// partitions, and a shared wheel also spreads their periodic work over
// the period instead of waking them together.
type wheel struct {
	sys  *System
	tick time.Duration

	mu      sync.Mutex
	slots   [][]*periodic
	serve   int // slot the next tick serves
	join    int // slot the next registration joins (round robin)
	live    int // registrations not cancelled
	timer   *time.Timer
	running bool // timer armed
	closed  bool
}

// periodic is one Every or EveryTo registration: it sends to pid, or
// hands msg to to.
type periodic struct {
	w       *wheel
	pid     *actor.PID
	to      Recipient
	msg     any
	stopped bool // under w.mu
}

// Recipient takes EveryTo's messages for an actor that may be parked
// (Park): it decides whether the message is worth starting the actor for.
// Periodic is called outside the wheel's lock (it may Spawn), so it can
// run just after the registration was cancelled; it must not block.
type Recipient interface{ Periodic(msg any) }

// Wheel shape: at most maxSlots slots, ticking no faster than minTick (a
// period shorter than minTick gets one slot ticking at the period).
const (
	maxSlots = 64
	minTick  = 50 * time.Millisecond
)

func newWheel(s *System, d time.Duration) *wheel {
	n := max(1, min(maxSlots, int(d/minTick)))
	return &wheel{sys: s, tick: d / time.Duration(n), slots: make([][]*periodic, n)}
}

// Every sends msg to pid once every d, the first time within d from now,
// until the actor is stopped through System.Stop, the system shuts down,
// or cancel is called; after any of those returns, no further send
// happens. An actor that is not running, or d ≤ 0, gets nothing. A slow
// actor gets one message per period all the same, as a ticker would have
// sent.
func (s *System) Every(pid *actor.PID, d time.Duration, msg any) (cancel func()) {
	return s.every(func() *Info { return s.procs[pid.Id] }, d, &periodic{pid: pid, msg: msg})
}

// EveryTo is Every for an actor registered as name (kind/name), parked
// or running: msg goes to to.Periodic once every d, until the actor is
// stopped through System.Stop or Unpark, the system shuts down, or cancel
// is called.
func (s *System) EveryTo(name string, d time.Duration, msg any, to Recipient) (cancel func()) {
	return s.every(func() *Info { return s.registry[name] }, d, &periodic{to: to, msg: msg})
}

// every registers p with the actor find returns (under the lock), if it
// is registered under its name: a detached actor's periodic work ended
// with Detach.
func (s *System) every(find func() *Info, d time.Duration, p *periodic) (cancel func()) {
	s.mu.Lock()
	i := find()
	if i == nil || s.registry[i.Name] != i || d <= 0 || s.shutdown {
		s.mu.Unlock()
		return func() {}
	}
	w := s.wheels[d]
	if w == nil {
		w = newWheel(s, d)
		s.wheels[d] = w
	}
	p.w = w
	i.every = append(i.every, p)
	s.mu.Unlock()
	w.add(p)
	return p.stop
}

func (w *wheel) add(p *periodic) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		p.stopped = true
		return
	}
	w.slots[w.join] = append(w.slots[w.join], p)
	w.join = (w.join + 1) % len(w.slots)
	w.live++
	if !w.running {
		w.running = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.tick, w.fire)
		} else {
			w.timer.Reset(w.tick)
		}
	}
}

// fire serves one slot and re-arms while registrations remain. Sends
// happen under the wheel's lock, so a cancel that returned is never
// followed by a send; Recipients are called after it is released, since
// one may Spawn, which takes the System's lock (and Stop holds that one
// while it cancels, taking this one).
func (w *wheel) fire() {
	var deliver []*periodic
	defer func() {
		for _, p := range deliver {
			p.to.Periodic(p.msg)
		}
	}()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	slot := w.slots[w.serve]
	keep := slot[:0]
	for _, p := range slot {
		if p.stopped {
			continue
		}
		if p.to != nil {
			deliver = append(deliver, p)
		} else {
			w.sys.Send(p.pid, p.msg)
		}
		keep = append(keep, p)
	}
	clear(slot[len(keep):])
	w.slots[w.serve] = keep
	w.serve = (w.serve + 1) % len(w.slots)
	if w.live > 0 {
		w.timer.Reset(w.tick)
	} else {
		w.running = false
	}
}

func (p *periodic) stop() {
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		w.live--
	}
}

func (w *wheel) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
}

func stopEvery(i *Info) {
	for _, p := range i.every {
		p.stop()
	}
	i.every = nil
}
