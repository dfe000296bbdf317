package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/system"
)

func init() {
	register(&Scenario{
		Name: "actor",
		About: "message round trip (send, reply on a channel carried in the message) from one goroutine: " +
			"a bare protoactor actor, a plain goroutine+channel, and an actor spawned through kaas's actors/system " +
			"(counted mailbox, panic recovery)",
		Headline: "round trips", Latency: "round trip",
		// kaas-actor first and bare protoactor second: the ratio line
		// compares every side with the second.
		Sides:    []string{"kaas-actor", "protoactor", "channel"},
		NoTarget: true,
		Params:   func(o *Options) string { return fmt.Sprintf("%v measured per side", o.Duration) },
		Run:      actorRoundTrips,
	})
}

type ping struct{ reply chan struct{} }

type echo struct{}

func (echo) Receive(c actor.Context) {
	if p, ok := c.Message().(*ping); ok {
		p.reply <- struct{}{}
	}
}

func actorRoundTrips(ctx context.Context, e *Env) error {
	var send func(*ping)
	switch e.Side {
	case "protoactor":
		as := actor.NewActorSystem(actor.WithLoggerFactory(quietLogger))
		defer as.Shutdown()
		pid := as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return echo{} }))
		send = func(p *ping) { as.Root.Send(pid, p) }
	case "kaas-actor":
		sys := system.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
		defer sys.Shutdown()
		pid, err := sys.Spawn("bench", "echo", echo{}, nil)
		if err != nil {
			return err
		}
		defer sys.Stop(pid)
		send = func(p *ping) { sys.Send(pid, p) }
	case "channel":
		in := make(chan *ping, 1024)
		defer close(in)
		go func() {
			for p := range in {
				p.reply <- struct{}{}
			}
		}()
		send = func(p *ping) { in <- p }
	default:
		return fmt.Errorf("unknown side %q", e.Side)
	}
	p := &ping{reply: make(chan struct{}, 1)}
	for range 10_000 { // warm up
		send(p)
		<-p.reply
	}
	e.Begin()
	for e.Running() && ctx.Err() == nil {
		// Each round trip is timed on its own (two clock reads, ~50 ns,
		// are included in every side alike).
		for range 256 {
			start := time.Now()
			send(p)
			<-p.reply
			e.Rec.Op(0, 0, time.Since(start))
		}
	}
	return nil
}

func quietLogger(*actor.ActorSystem) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
