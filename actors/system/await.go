package system

import (
	"context"
	"fmt"
	"time"
)

// Await is the one way a caller outside an actor waits for an actor's
// reply: the value the actor sends on reply (a channel with room for it,
// so the actor never blocks), or ctx's error if ctx ends first.
//
// The one timeout rule is that ctx alone bounds the wait:
//   - a caller that only looks (the inspector, its state functions)
//     passes a context with its budget (Within, or the HTTP request's):
//     a busy actor is reported busy and never stalls the caller;
//   - a caller that needs the outcome of a change (a slot opened or
//     closed, an actor retired, a transaction verified) passes
//     context.Background(): an actor always answers (a panic in Receive
//     is answered, not restarted), giving up would leave the outcome
//     unknown, and what the actor itself waits on is bounded where it
//     waits (a failed fsync is final, a peer request has its timeout).
func Await[T any](ctx context.Context, reply <-chan T) (T, error) {
	select {
	case v := <-reply:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Within is a context bounding a look at an actor to d (the inspector's
// budgets).
func Within(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Busy is what the inspector shows for an actor that did not answer
// within d: the state of a look that Await gave up on.
func Busy(what string, d time.Duration) map[string]any {
	return map[string]any{"status": fmt.Sprintf("busy: no %s within %s", what, d)}
}
