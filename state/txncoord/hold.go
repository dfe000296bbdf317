package txncoord

import "time"

// Requests that meet a transition in flight wait for it in the
// coordinator instead of being answered CONCURRENT_TRANSACTIONS (R-TXN-2
// [project]). Every request waits while a write is outstanding (a write
// always completes, and a request must never meet a half-written
// transition). The requests that need the previous transaction finished
// — InitProducerId, AddPartitionsToTxn and TV2's implicit add,
// AddOffsetsToTxn, EndTxn — also wait for its markers, each until its own
// deadline: the request's timeout where the request carries one (a
// Produce v12 that adds its partition), else the coordinator's bound
// (--txn-marker-wait), which stands for the client's request timeout
// that those requests do not carry. Only a request whose deadline passes
// with the markers still out is answered CONCURRENT_TRANSACTIONS; one
// whose transition ends first is handled then, in arrival order among
// the others ready. Apache 4.x answers 51 at once to a client's request
// (the client backs off and retries) and, for a Produce's implicit add,
// retries the coordinator every add.partitions.to.txn.retry.backoff.ms
// (20 ms) for up to min(add.partitions.to.txn.retry.backoff.max.ms
// (100 ms), request.timeout.ms); waiting for the transition's end instead
// answers the same, without the client's or the broker's backoff.

// Waiting is the queue of requests held for the transition in flight.
// It is owned by the transactional id's actor, as the Txn is; it reads no
// clock: every call that depends on time is handed the time.
type Waiting struct{ q []waiter }

type waiter struct {
	msg      any
	markers  bool // needs the transition finished, not only its write
	deadline time.Time
}

// WaitDeadline is when a request that arrived at arrived stops waiting
// for a transition's markers: its own deadline if it carries one (not
// zero), else arrived + bound.
func WaitDeadline(arrived, own time.Time, bound time.Duration) time.Time {
	if !own.IsZero() {
		return own
	}
	return arrived.Add(bound)
}

// MustWait reports whether a request must wait now: while a write is
// outstanding, and, if it needs the transition finished (markers), while
// one is in flight.
func (t *Txn) MustWait(markers bool) bool {
	return t.Persisting() || (markers && t.InFlight())
}

// Hold queues msg until t no longer makes it wait (Ready) or, waiting
// for markers, until deadline (Expired).
func (w *Waiting) Hold(msg any, markers bool, deadline time.Time) {
	w.q = append(w.q, waiter{msg: msg, markers: markers, deadline: deadline})
}

// Len is the number of held requests.
func (w *Waiting) Len() int { return len(w.q) }

// Ready removes and returns the first held request that t no longer makes
// wait; false when there is none. Called after every transition of t,
// until false.
func (w *Waiting) Ready(t *Txn) (any, bool) {
	for i, h := range w.q {
		if !t.MustWait(h.markers) {
			w.q = append(w.q[:i], w.q[i+1:]...)
			return h.msg, true
		}
	}
	return nil, false
}

// Expired removes and returns, in arrival order, the requests waiting for
// t's markers whose deadline is not after now: they are answered
// CONCURRENT_TRANSACTIONS. Requests waiting for a write are kept.
func (w *Waiting) Expired(t *Txn, now time.Time) []any {
	if t.Persisting() {
		return nil
	}
	var out []any
	kept := w.q[:0]
	for _, h := range w.q {
		if h.markers && t.InFlight() && !now.Before(h.deadline) {
			out = append(out, h.msg)
			continue
		}
		kept = append(kept, h)
	}
	clear(w.q[len(kept):]) // let the answered requests go
	w.q = kept
	return out
}

// Deadline is the earliest deadline among the requests that wait for
// markers (when Expired should next be asked); false when none does.
func (w *Waiting) Deadline() (time.Time, bool) {
	var d time.Time
	for _, h := range w.q {
		if h.markers && (d.IsZero() || h.deadline.Before(d)) {
			d = h.deadline
		}
	}
	return d, !d.IsZero()
}

// Drain removes and returns every held request (the actor stops).
func (w *Waiting) Drain() []any {
	out := make([]any, len(w.q))
	for i, h := range w.q {
		out[i] = h.msg
	}
	w.q = nil
	return out
}
