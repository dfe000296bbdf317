package system

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A detached actor gives its name up at once and keeps running until it
// is stopped: a successor is parked and spawned under the name while it
// still takes messages sent to its PID, its periodic work ends with the
// Detach, and stopping either one leaves the other alone.
func TestDetachFreesTheNameForASuccessor(t *testing.T) {
	s := newTestSystem(t)
	first := &keyed{stopped: make(chan struct{})}
	old, err := s.Spawn("test", "p", first, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel := s.Every(old, time.Millisecond, "tick")
	defer cancel()
	s.Detach(old)
	if _, ok := s.Lookup("test/p"); ok {
		t.Fatal("a detached actor is still listed under its name")
	}
	if err := s.Park("test", "p", nil); err != nil {
		t.Fatalf("parking a successor: %v", err)
	}
	second := &keyed{stopped: make(chan struct{})}
	cur, err := s.Spawn("test", "p", second, nil)
	if err != nil {
		t.Fatalf("spawning a successor: %v", err)
	}
	if cur.Id == old.Id {
		t.Fatalf("the successor has its predecessor's id %q", cur.Id)
	}
	if _, err := s.Spawn("test", "p", &keyed{}, nil); err == nil {
		t.Fatal("a live name was spawned twice")
	}
	s.Send(old, "late")
	s.Send(cur, "new")
	waitFor(t, "the late message at the detached actor", func() bool { return contains(first.seen(), "late") })
	waitFor(t, "the successor's message", func() bool { return contains(second.seen(), "new") })
	// Every tick sent before Detach returned is queued before "late".
	time.Sleep(20 * time.Millisecond) // twenty periods in which no tick may come
	seen := first.seen()
	for i, v := range seen {
		if v == "late" && countOf(seen[i:], "tick") > 0 {
			t.Fatalf("ticks after Detach: %v", seen[i:])
		}
	}
	s.Stop(old)
	<-first.stopped
	if info, ok := s.Lookup("test/p"); !ok || info.PID != cur {
		t.Fatalf("stopping the detached actor touched its successor: %+v", info)
	}
	s.Stop(cur)
	<-second.stopped
	if _, ok := s.Lookup("test/p"); ok {
		t.Fatal("still listed after the successor stopped")
	}
}

func contains(xs []any, v any) bool { return countOf(xs, v) > 0 }

func countOf(xs []any, v any) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

var _ actor.Actor = (*keyed)(nil)
