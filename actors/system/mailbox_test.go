package system

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// blocker holds its first message until release is closed.
type blocker struct{ release chan struct{} }

type hold struct{}

func (b *blocker) Receive(c actor.Context) {
	if _, ok := c.Message().(hold); ok {
		<-b.release
	}
}

// The counters read without asking the actor: depth from the mailbox,
// messages processed and the last one's time from the actor's wrapper.
func TestMailboxStats(t *testing.T) {
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer s.Shutdown()
	b := &blocker{release: make(chan struct{})}
	pid, err := s.Spawn("test", "blocker", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Lookup("test/blocker")
	waitFor(t, "Started to be processed", func() bool { return info.Mailbox.Processed() == 1 })
	const start = 1
	for range 4 {
		s.Send(pid, hold{})
	}
	waitFor(t, "three messages waiting behind the held one", func() bool { return info.Mailbox.Depth() == 3 })
	close(b.release)
	waitFor(t, "all four processed", func() bool {
		return info.Mailbox.Processed() == start+4 && info.Mailbox.Depth() == 0
	})
	if last := info.Mailbox.LastMessage(); last.IsZero() || time.Since(last) > time.Minute {
		t.Fatalf("last message at %v", last)
	}
	if ks := s.KindStats()["test"]; ks.Actors != 1 || ks.Processed != start+4 {
		t.Fatalf("kind stats %+v", ks)
	}
}
