package txn

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// sweeper is the expiry sweep (R-IPI-15): every ExpiryInterval it hands
// each expired entry to its actor, which deletes it unless it has moved
// meanwhile. An actor of its own, so the sweep runs on the actor system's
// timers and never on a request's path.
type sweeper struct {
	c      *Coordinator
	last   atomic.Int64 // unix ms of the last sweep
	handed atomic.Int64 // expired entries handed to their actors, in total
}

type sweep struct{}

func (s *sweeper) Receive(c actor.Context) {
	if _, ok := c.Message().(sweep); ok {
		now := time.Now()
		s.handed.Add(int64(s.c.expire(now)))
		s.last.Store(now.UnixMilli())
	}
}

// SweeperSummary is what the inspector shows for the sweeper.
type SweeperSummary struct {
	LastSweepMs int64 `json:"last_sweep_ms"`
	Expired     int64 `json:"expired"`
	EveryMs     int64 `json:"every_ms"`
	ExpiresMs   int64 `json:"expiration_ms"`
}

func (s *sweeper) Summary() SweeperSummary {
	return SweeperSummary{LastSweepMs: s.last.Load(), Expired: s.handed.Load(),
		EveryMs: s.c.cfg.ExpiryInterval.Milliseconds(), ExpiresMs: s.c.cfg.Expiration.Milliseconds()}
}
