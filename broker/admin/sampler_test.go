package admin

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"kaas/actors/system"
)

// An actor gets a series of its own once it has traffic, keeps it while
// any of the window shows some, and loses it once the whole window is
// idle (reading as zeros again, as an actor never tracked does).
func TestSamplerDropsSeriesIdleForTheWholeWindow(t *testing.T) {
	sys := system.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer sys.Shutdown()
	done := make(chan struct{}, 1)
	pid, err := sys.Spawn("test", "a", system.Func(func(msg any) {
		if _, ok := msg.(string); ok {
			done <- struct{}{}
		}
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSampler(sys, nil)
	at := time.Now()
	step := func() {
		at = at.Add(sampleEvery)
		s.sample(at)
	}
	step()
	sys.Send(pid, "hello")
	<-done
	step()
	if s.tracked["test/a"] == nil {
		t.Fatal("an actor with traffic has no series")
	}
	busyAt := s.n - 1
	for s.n-busyAt < keepSamples {
		step()
		if s.tracked["test/a"] == nil {
			t.Fatalf("series dropped %d samples after the traffic, inside the window", s.n-busyAt)
		}
	}
	step()
	if s.tracked["test/a"] != nil {
		t.Fatal("series kept after a whole window of idleness")
	}
	got := s.actor("test/a")
	for k, v := range got.Values["messages_per_sec"] {
		if v != 0 {
			t.Fatalf("dropped series reads %v at %d", v, k)
		}
	}
}
