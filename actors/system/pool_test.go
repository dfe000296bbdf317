package system

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func newTestSystem(t *testing.T) *System {
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(s.Shutdown)
	return s
}

// keyed is a pooled test actor: it records what it receives and answers
// a RetireRequest with agree.
type keyed struct {
	key     string
	pid     *actor.PID
	agree   atomic.Bool
	mu      sync.Mutex
	got     []any
	stopped chan struct{}
}

func (k *keyed) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case RetireRequest:
		k.record("retire?")
		m.Reply(k.agree.Load())
	case *actor.Stopped:
		close(k.stopped)
	case string:
		k.record(m)
	}
}

func (k *keyed) PID() *actor.PID { return k.pid }

func (k *keyed) record(v any) {
	k.mu.Lock()
	k.got = append(k.got, v)
	k.mu.Unlock()
}

func (k *keyed) seen() []any {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]any(nil), k.got...)
}

type spawns struct {
	s     *System
	n     atomic.Int32
	agree bool
}

func (sp *spawns) for_(key string) Spawner[*keyed] {
	return func() (*keyed, bool, error) {
		sp.n.Add(1)
		k := &keyed{key: key, stopped: make(chan struct{})}
		k.agree.Store(sp.agree)
		pid, err := sp.s.Spawn("keyed", key, k, nil)
		k.pid = pid
		return k, err == nil, err
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Actors start on the first message for their key, and only with a
// spawner; later messages reach the same actor.
func TestPoolStartsActorsOnDemand(t *testing.T) {
	s := newTestSystem(t)
	p := NewPool[*keyed](s)
	sp := &spawns{s: s}
	if r, err := p.Send("a", nil, false, "x"); r != Absent || err != nil {
		t.Fatalf("no spawner: %v %v, want Absent", r, err)
	}
	for _, m := range []string{"1", "2"} {
		if r, err := p.Send("a", sp.for_("a"), false, m); r != Routed || err != nil {
			t.Fatalf("send %s: %v %v", m, r, err)
		}
	}
	if r, _ := p.Send("a", nil, false, "3"); r != Routed {
		t.Fatalf("a live actor without spawner: %v", r)
	}
	if sp.n.Load() != 1 || len(p.Live()) != 1 {
		t.Fatalf("%d spawns, %d live; want 1, 1", sp.n.Load(), len(p.Live()))
	}
	k := p.Live()[0]
	waitFor(t, "three messages", func() bool { return len(k.seen()) == 3 })
	p.Stop()
	if r, _ := p.Send("b", sp.for_("b"), false, "x"); r != Absent {
		t.Fatalf("a stopped pool started an actor: %v", r)
	}
	select {
	case <-k.stopped:
	default:
		t.Fatal("Stop returned before the actor stopped")
	}
}

// A retirement is asked after the messages already sent; an actor that
// agrees is stopped and the next message starts a fresh one. Meanwhile
// Send with wait waits it out; without, it answers Retiring.
func TestPoolRetiresAnActorThatAgrees(t *testing.T) {
	s := newTestSystem(t)
	p := NewPool[*keyed](s)
	sp := &spawns{s: s, agree: true}
	p.Send("a", sp.for_("a"), false, "before")
	old := p.Live()[0]
	if !p.Retire("a", old) {
		t.Fatal("Retire refused")
	}
	if p.Retire("a", old) {
		t.Fatal("a second Retire while retiring was accepted")
	}
	if r, _ := p.Send("a", sp.for_("a"), false, "no wait"); r != Retiring && r != Routed {
		t.Fatalf("send during retirement: %v", r)
	}
	r, err := p.Send("a", sp.for_("a"), true, "after")
	if r != Routed || err != nil {
		t.Fatalf("waiting send: %v %v", r, err)
	}
	<-old.stopped
	if got := old.seen(); len(got) != 2 || got[0] != "before" || got[1] != "retire?" {
		t.Fatalf("the retired actor saw %v, want [before retire?]", got)
	}
	fresh := p.Live()[0]
	if fresh == old {
		t.Fatal("no fresh actor after retirement")
	}
	waitFor(t, "the fresh actor's message", func() bool {
		got := fresh.seen()
		return len(got) > 0 && got[len(got)-1] == "after"
	})
}

// An actor that does not agree stays and keeps its messages.
func TestPoolKeepsAnActorThatRefuses(t *testing.T) {
	s := newTestSystem(t)
	p := NewPool[*keyed](s)
	sp := &spawns{s: s}
	p.Send("a", sp.for_("a"), false, "1")
	k := p.Live()[0]
	p.Retire("a", k)
	if r, _ := p.Send("a", nil, true, "2"); r != Routed {
		t.Fatalf("after a refusal: %v", r)
	}
	waitFor(t, "the message after the refusal", func() bool { return len(k.seen()) == 3 })
	if got := k.seen(); got[1] != "retire?" || got[2] != "2" || sp.n.Load() != 1 {
		t.Fatalf("saw %v after %d spawns", got, sp.n.Load())
	}
	p.Close()
	if p.Retire("a", k) || !p.Closed() {
		t.Fatal("a closed pool retires")
	}
	if r, _ := p.Send("a", nil, false, "3"); r != Routed {
		t.Fatalf("a closed pool stopped routing to live actors: %v", r)
	}
}

// Stop waits for a retirement under way.
func TestPoolStopWaitsForRetirements(t *testing.T) {
	s := newTestSystem(t)
	p := NewPool[*keyed](s)
	sp := &spawns{s: s, agree: true}
	for _, k := range []string{"a", "b", "c"} {
		p.Send(k, sp.for_(k), false, "hi")
	}
	live := p.Live()
	p.Retire("b", live[1])
	p.Stop()
	for _, k := range live {
		select {
		case <-k.stopped:
		default:
			t.Fatalf("%s still running after Stop", k.key)
		}
	}
	if len(s.Actors()) != 0 {
		t.Fatalf("actors left: %d", len(s.Actors()))
	}
}
