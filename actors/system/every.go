package system

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// periodic is one Every registration: a timer that re-arms itself after
// each send, so no goroutine waits between sends.
type periodic struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

// Every sends msg to pid every d, the first time d from now, until the
// actor is stopped through System.Stop, the system shuts down, or cancel
// is called; after any of those returns, no further send happens. An
// actor that is not running, or d ≤ 0, gets nothing. A slow actor gets
// one message per period all the same, as a ticker would have sent.
func (s *System) Every(pid *actor.PID, d time.Duration, msg any) (cancel func()) {
	p := &periodic{}
	s.mu.Lock()
	i, live := s.registry[pid.Id]
	if !live || d <= 0 || s.shutdown {
		s.mu.Unlock()
		return func() {}
	}
	i.every = append(i.every, p)
	s.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t = time.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.stopped {
			return
		}
		s.Send(pid, msg)
		p.t.Reset(d)
	})
	return p.stop
}

func (p *periodic) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.t != nil {
		p.t.Stop()
	}
}

// stopEvery cancels an actor's Every registrations.
func stopEvery(i *Info) {
	for _, p := range i.every {
		p.stop()
	}
	i.every = nil
}
