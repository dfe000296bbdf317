package system

import (
	"sort"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Pool holds the actors of one kind that are started on demand, one per
// key — a transactional id's coordinator actor, a consumer group's actor
// — and stops them when they retire: because the actor says it is done (a
// Dead group) or has been idle (passivation). Messages for a key go
// through the pool and are sent under its lock, so none can land behind
// a retiring actor's last message. H is what the pool keeps per actor
// (a handle that knows its actor's address).
type Pool[H Addressed] struct {
	sys *System

	mu     sync.Mutex
	live   map[string]*member[H]
	closed bool
}

// Addressed is a pooled actor's handle.
type Addressed interface{ PID() *actor.PID }

type member[H Addressed] struct {
	h   H
	pid *actor.PID
	// retiring is non-nil while the actor is being asked to retire, and
	// closed once that is settled (stopped, or staying).
	retiring chan struct{}
}

// Route says what became of a message sent through a pool.
type Route int

const (
	Routed   Route = iota // the key's actor has it
	Absent                // no actor for the key, and none was started
	Retiring              // the key's actor is stopping
)

// Spawner starts the actor for a key and returns its handle; ok false
// (and a nil error) means there is nothing to start.
type Spawner[H Addressed] func() (h H, ok bool, err error)

// RetireRequest asks a pooled actor whether it may stop now. It arrives
// after every message sent to the actor before the retirement began, and
// no message for its key is routed to it meanwhile; the actor answers
// through Reply. An actor that agrees is stopped and forgotten (the next
// message for its key starts a fresh one); one that does not keeps
// receiving.
type RetireRequest struct{ Reply func(ok bool) }

// Fail answers a RetireRequest whose handling panicked: the actor stays.
func (r RetireRequest) Fail(any) { r.Reply(false) }

// NewPool makes an empty pool.
func NewPool[H Addressed](sys *System) *Pool[H] {
	return &Pool[H]{sys: sys, live: map[string]*member[H]{}}
}

// Send delivers msg to key's actor. With no actor for the key, spawn (if
// not nil) starts one, unless the pool is closed. While the key's actor
// is retiring, Send with wait waits for it to stop (then starts a fresh
// one) or to stay; without wait it returns Retiring.
func (p *Pool[H]) Send(key string, spawn Spawner[H], wait bool, msg any) (Route, error) {
	for {
		p.mu.Lock()
		if m := p.live[key]; m != nil {
			if m.retiring != nil {
				ch := m.retiring
				p.mu.Unlock()
				if !wait {
					return Retiring, nil
				}
				<-ch
				continue
			}
			p.sys.Send(m.pid, msg)
			p.mu.Unlock()
			return Routed, nil
		}
		route, err := p.spawn(key, spawn, msg)
		p.mu.Unlock()
		return route, err
	}
}

// spawn starts key's actor and sends it msg; p.mu is held.
func (p *Pool[H]) spawn(key string, spawn Spawner[H], msg any) (Route, error) {
	if spawn == nil || p.closed {
		return Absent, nil
	}
	h, ok, err := spawn()
	if err != nil || !ok {
		return Absent, err
	}
	pid := h.PID()
	p.live[key] = &member[H]{h: h, pid: pid}
	if msg != nil {
		p.sys.Send(pid, msg)
	}
	return Routed, nil
}

// Start starts key's actor with spawn unless it is running (recovery at
// start-up); false if the pool is closed or spawn started nothing.
func (p *Pool[H]) Start(key string, spawn Spawner[H]) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live[key] != nil {
		return true, nil
	}
	route, err := p.spawn(key, spawn, nil)
	return route == Routed, err
}

// Live lists the handles of the actors not retiring, by key.
func (p *Pool[H]) Live() []H {
	p.mu.Lock()
	keys := make([]string, 0, len(p.live))
	for k, m := range p.live {
		if m.retiring == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]H, len(keys))
	for i, k := range keys {
		out[i] = p.live[k].h
	}
	p.mu.Unlock()
	return out
}

// Retire stops routing to key's actor h and sends it a RetireRequest; if
// it agrees, it is stopped and forgotten. It never blocks, so the actor
// may call it on itself. False if h is not key's actor, it is already
// retiring, or the pool is closed (Stop stops everything).
func (p *Pool[H]) Retire(key string, h H) bool {
	pid := h.PID()
	p.mu.Lock()
	m := p.live[key]
	if m == nil || m.pid.Id != pid.Id || m.retiring != nil || p.closed {
		p.mu.Unlock()
		return false
	}
	m.retiring = make(chan struct{})
	p.mu.Unlock()
	p.sys.Send(pid, RetireRequest{Reply: func(ok bool) {
		// Off the actor's goroutine: stopping it waits for it.
		go p.settle(key, m, ok)
	}})
	return true
}

func (p *Pool[H]) settle(key string, m *member[H], ok bool) {
	if ok {
		p.sys.Stop(m.pid)
	}
	p.mu.Lock()
	if ok && p.live[key] == m {
		delete(p.live, key)
	}
	ch := m.retiring
	m.retiring = nil
	p.mu.Unlock()
	close(ch)
}

// Close stops starting actors and retiring them; the live ones keep
// receiving until Stop.
func (p *Pool[H]) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// Closed reports whether Close (or Stop) was called.
func (p *Pool[H]) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// StopWhere stops the actors whose key matches (each after the messages
// already sent to it), waiting for retirements under way; the pool stays
// open (a cluster broker handing one coordinator slot off). A message
// sent for such a key afterwards starts a fresh actor, so the caller stops
// routing them first.
func (p *Pool[H]) StopWhere(match func(key string) bool) {
	p.mu.Lock()
	var members []*member[H]
	var waits []chan struct{}
	for k, m := range p.live {
		if match(k) {
			members, waits = append(members, m), append(waits, m.retiring)
			delete(p.live, k)
		}
	}
	p.mu.Unlock()
	for i, m := range members {
		if waits[i] != nil {
			<-waits[i]
		}
		p.sys.Stop(m.pid)
	}
}

// Stop closes the pool and stops every actor (each after the messages
// already sent to it), waiting for retirements under way.
func (p *Pool[H]) Stop() {
	p.mu.Lock()
	p.closed = true
	members := make([]*member[H], 0, len(p.live))
	waits := make([]chan struct{}, 0, len(p.live))
	for _, m := range p.live {
		members, waits = append(members, m), append(waits, m.retiring)
	}
	p.live = map[string]*member[H]{}
	p.mu.Unlock()
	for i, m := range members {
		if waits[i] != nil {
			<-waits[i]
		}
		p.sys.Stop(m.pid) // returns at once if retirement stopped it
	}
}
