package system

import "github.com/asynkron/protoactor-go/actor"

// Func is an actor made of one function of each message it receives
// (lifecycle messages included), for actors with no state of their own —
// in tests above the actors layer, which may not import protoactor.
type Func func(msg any)

// Receive implements actor.Actor.
func (f Func) Receive(c actor.Context) { f(c.Message()) }
