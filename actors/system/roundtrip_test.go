package system

import (
	"io"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

type rtPing struct{ reply chan struct{} }

type rtEcho struct{}

func (rtEcho) Receive(c actor.Context) {
	if p, ok := c.Message().(*rtPing); ok {
		p.reply <- struct{}{}
	}
}

// BenchmarkRoundTrip is the bench "actor" scenario as a micro-benchmark:
// one message and its reply, through a bare protoactor actor and through
// one spawned by System.
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("protoactor", func(b *testing.B) {
		as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
		defer as.Shutdown()
		pid := as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rtEcho{} }))
		roundTrips(b, func(p *rtPing) { as.Root.Send(pid, p) })
	})
	b.Run("system", func(b *testing.B) {
		s := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
		defer s.Shutdown()
		pid, err := s.Spawn("bench", "echo", rtEcho{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		roundTrips(b, func(p *rtPing) { s.Send(pid, p) })
	})
}

func roundTrips(b *testing.B, send func(*rtPing)) {
	p := &rtPing{reply: make(chan struct{}, 1)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send(p)
		<-p.reply
	}
}
