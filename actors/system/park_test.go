package system

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// recipient counts EveryTo deliveries and forwards them to an actor once
// it runs.
type recipient struct {
	n   atomic.Int32
	s   *System
	pid atomic.Pointer[actor.PID]
}

func (r *recipient) Periodic(msg any) {
	r.n.Add(1)
	if pid := r.pid.Load(); pid != nil {
		r.s.Send(pid, msg)
	}
}

// A parked actor is listed with no PID and an empty mailbox, gets its
// EveryTo deliveries, and keeps them once Spawn starts it under its
// name; Stop then ends them. Its name cannot be parked or spawned twice.
func TestParkThenSpawn(t *testing.T) {
	s := newTestSystem(t)
	if err := s.Park("test", "p", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Park("test", "p", nil); !errors.Is(err, actor.ErrNameExists) {
		t.Fatalf("parking a name twice: %v", err)
	}
	info, ok := s.Lookup("test/p")
	if !ok || info.PID != nil || info.Mailbox.Depth() != 0 || info.Mailbox.Processed() != 0 || !info.Mailbox.LastMessage().IsZero() {
		t.Fatalf("parked actor listed as %+v (found %v)", info, ok)
	}
	if n := len(s.Actors()); n != 1 {
		t.Fatalf("%d actors listed, want the parked one", n)
	}
	r := &recipient{s: s}
	s.EveryTo("test/p", time.Millisecond, tick{}, r)
	waitFor(t, "deliveries while parked", func() bool { return r.n.Load() >= 2 })

	a := &ticked{probe: make(chan int32, 1)}
	pid, err := s.Spawn("test", "p", a, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.pid.Store(pid)
	live, _ := s.Lookup("test/p")
	if live.PID == nil || live.Started != info.Started || len(live.every) != 1 {
		t.Fatalf("spawned actor listed as %+v", live)
	}
	waitFor(t, "ticks reaching the spawned actor", func() bool { return a.n.Load() >= 2 })
	if live.Mailbox.Processed() < 2 {
		t.Fatalf("spawned actor's mailbox counted %d messages", live.Mailbox.Processed())
	}
	s.Stop(pid)
	n := r.n.Load()
	time.Sleep(20 * time.Millisecond) // twenty periods
	if later := r.n.Load(); later != n {
		t.Fatalf("%d deliveries after Stop", later-n)
	}
}

// Unpark forgets a parked actor and its registrations, and leaves a
// running one alone.
func TestUnpark(t *testing.T) {
	s := newTestSystem(t)
	if err := s.Park("test", "p", nil); err != nil {
		t.Fatal(err)
	}
	r := &recipient{s: s}
	s.EveryTo("test/p", time.Millisecond, tick{}, r)
	waitFor(t, "a delivery", func() bool { return r.n.Load() >= 1 })
	s.Unpark("test", "p")
	if _, ok := s.Lookup("test/p"); ok {
		t.Fatal("still listed after Unpark")
	}
	n := r.n.Load()
	time.Sleep(20 * time.Millisecond)
	if later := r.n.Load(); later != n {
		t.Fatalf("%d deliveries after Unpark", later-n)
	}
	pid, err := s.Spawn("test", "q", &ticked{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Unpark("test", "q")
	if i, ok := s.Lookup("test/q"); !ok || i.PID != pid {
		t.Fatal("Unpark removed a running actor")
	}
}
