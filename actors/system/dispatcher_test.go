package system

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Schedule never waits for a busy worker: a second batch runs while the
// first is blocked (an actor fsyncing inline must not stall the others).
func TestPooledDispatcherNeverBlocksOnBusyWorkers(t *testing.T) {
	d := newPooledDispatcher(10)
	defer d.close()
	release := make(chan struct{})
	d.Schedule(func() { <-release })
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("second batch did not run while the first worker was busy")
	}
	close(release)
}

type counter struct {
	got  []int
	done chan []int
}

type num int
type flush struct{}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case num:
		c.got = append(c.got, int(m))
	case flush:
		c.done <- c.got
	}
}

// Actors spawned through System keep per-actor message order on the
// pooled workers.
func TestSpawnedActorsKeepMessageOrder(t *testing.T) {
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer s.Shutdown()
	const actors, msgs = 8, 5000
	var cs []*counter
	var pids []*actor.PID
	for i := range actors {
		c := &counter{done: make(chan []int, 1)}
		pid, err := s.Spawn("test", string(rune('a'+i)), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, pids = append(cs, c), append(pids, pid)
	}
	for n := range msgs {
		for _, pid := range pids {
			s.Send(pid, num(n))
		}
	}
	for i, pid := range pids {
		s.Send(pid, flush{})
		select {
		case got := <-cs[i].done:
			if len(got) != msgs {
				t.Fatalf("actor %d got %d messages, want %d", i, len(got), msgs)
			}
			for j, v := range got {
				if v != j {
					t.Fatalf("actor %d: message %d is %d", i, j, v)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("actor %d did not drain its mailbox", i)
		}
	}
}
