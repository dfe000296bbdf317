package system

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type tick struct{}

type ticked struct {
	n     atomic.Int32
	probe chan int32
}

func (a *ticked) Receive(c actor.Context) {
	switch c.Message().(type) {
	case tick:
		a.n.Add(1)
	case flush:
		a.probe <- a.n.Load()
	}
}

// Every sends until cancelled, then never again.
func TestEverySendsUntilCancelled(t *testing.T) {
	s := newTestSystem(t)
	a := &ticked{probe: make(chan int32, 1)}
	pid, err := s.Spawn("test", "ticked", a, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel := s.Every(pid, time.Millisecond, tick{})
	waitFor(t, "three ticks", func() bool { return a.n.Load() >= 3 })
	cancel()
	s.Send(pid, flush{})
	n := <-a.probe
	time.Sleep(20 * time.Millisecond) // twenty periods
	s.Send(pid, flush{})
	if later := <-a.probe; later != n {
		t.Fatalf("%d ticks after cancel", later-n)
	}
}

// Stopping the actor or the system ends its Every registrations;
// registering for an actor that is gone does nothing.
func TestEveryEndsWithTheActor(t *testing.T) {
	s := newTestSystem(t)
	a := &ticked{probe: make(chan int32, 1)}
	pid, _ := s.Spawn("test", "ticked", a, nil)
	s.Every(pid, time.Millisecond, tick{})
	s.Every(pid, time.Hour, tick{})
	waitFor(t, "a tick", func() bool { return a.n.Load() >= 1 })
	info, _ := s.Lookup("test/ticked")
	s.Stop(pid)
	if len(info.every) != 0 {
		t.Fatalf("%d registrations left after Stop", len(info.every))
	}
	s.Every(pid, time.Millisecond, tick{}) // a stopped actor: nothing

	b := &ticked{probe: make(chan int32, 1)}
	pid2, _ := s.Spawn("test", "other", b, nil)
	s.Every(pid2, time.Hour, tick{})
	info2, _ := s.Lookup("test/other")
	s.Shutdown()
	for _, p := range info2.every {
		if !p.stopped {
			t.Fatal("a registration survived Shutdown")
		}
	}
}

// Registrations of one period share a wheel: each is still served once
// per turn, whichever slot it landed in.
func TestEveryServesEveryRegistrationOfAPeriod(t *testing.T) {
	s := newTestSystem(t)
	const n = 20
	var actors []*ticked
	for i := range n {
		a := &ticked{probe: make(chan int32, 1)}
		pid, err := s.Spawn("test", string(rune('a'+i)), a, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Every(pid, 200*time.Millisecond, tick{})
		actors = append(actors, a)
	}
	if w := s.wheels[200*time.Millisecond]; w == nil || len(w.slots) != 4 {
		t.Fatalf("wheel for 200ms: %+v, want 4 slots of 50ms", w)
	}
	waitFor(t, "two ticks for every registration", func() bool {
		for _, a := range actors {
			if a.n.Load() < 2 {
				return false
			}
		}
		return true
	})
}
