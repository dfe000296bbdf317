package system

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// InspectRequest asks an actor for its inspector summary: the actor sends
// it on Reply (buffered, so the actor never blocks).
type InspectRequest struct{ Reply chan any }

// inspectWait is how long the inspector waits for a busy actor.
const inspectWait = 250 * time.Millisecond

// Inspect asks pid for its summary with an InspectRequest and gives up
// after a short wait, so a busy actor never stalls the inspector (nor the
// other way round). Actors use it as the state function they Spawn with.
func (s *System) Inspect(pid *actor.PID) any {
	req := &InspectRequest{Reply: make(chan any, 1)}
	s.Send(pid, req)
	ctx, cancel := Within(inspectWait)
	defer cancel()
	v, err := Await(ctx, req.Reply)
	if err != nil {
		return Busy("answer", inspectWait)
	}
	return v
}
