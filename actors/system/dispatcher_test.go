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

// Every Schedule is counted as a wake-up, and one that found no idle
// worker as a start too.
func TestPooledDispatcherCountsWakeups(t *testing.T) {
	d := newPooledDispatcher(10)
	defer d.close()
	for range 3 {
		ran := make(chan struct{})
		d.Schedule(func() { close(ran) })
		<-ran
		for d.idleWorkers() == 0 { // the worker goes back to the pool after fn
			time.Sleep(time.Millisecond)
		}
	}
	if w, s := d.wakeups.Load(), d.started.Load(); w != 3 || s != 1 {
		t.Fatalf("wakeups %d, started %d; want 3 and 1 (one worker reused)", w, s)
	}
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

// Workers left idle for a whole sweep interval exit; the pool starts new
// ones when work comes back.
func TestPooledDispatcherRetiresIdleWorkers(t *testing.T) {
	d := newPooledDispatcher(10)
	defer d.close()
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	for range 3 { // three busy at once: three workers
		d.Schedule(func() { started <- struct{}{}; <-release })
	}
	for range 3 {
		<-started
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for d.idleWorkers() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d idle workers, want 3", d.idleWorkers())
		}
		time.Sleep(time.Millisecond)
	}
	d.sweep() // the three were idle since before: but lowWater starts at 0
	if n := d.idleWorkers(); n != 3 {
		t.Fatalf("first sweep left %d idle, want 3 (none was idle a whole interval)", n)
	}
	d.Schedule(func() {}) // takes one; it goes back on top
	d.sweep()
	if n := d.idleWorkers(); n > 1 {
		t.Fatalf("second sweep left %d idle, want at most the one used since", n)
	}
	ran := make(chan struct{})
	d.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("no batch ran after the sweep")
	}
}

type panicky struct {
	n    int
	seen chan int
}

type boom struct{ failed chan any }

func (b boom) Fail(reason any) { b.failed <- reason }

func (p *panicky) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case boom:
		p.n++
		panic("boom")
	case num:
		p.n++
		p.seen <- p.n
		_ = m
	}
}

// A panic answers the message through its Fail and leaves the actor, with
// its state, in place for the next one.
func TestPanicFailsTheMessageAndKeepsTheActor(t *testing.T) {
	s := newTestSystem(t)
	a := &panicky{seen: make(chan int, 1)}
	pid, err := s.Spawn("test", "panicky", a, nil)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan any, 1)
	s.Send(pid, boom{failed: failed})
	select {
	case r := <-failed:
		if r != "boom" {
			t.Fatalf("Fail got %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Fail was not called")
	}
	s.Send(pid, num(1))
	select {
	case n := <-a.seen:
		if n != 2 {
			t.Fatalf("state after the panic: %d messages counted, want 2", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the actor stopped taking messages after a panic")
	}
}
