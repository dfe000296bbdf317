package txn

import (
	"fmt"
	"time"

	"kaas/model/txnstate"
)

// Summary is a transactional id's state for the inspector, built from
// what the actor published after the last message it handled.
type Summary struct {
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	LastProducerID  int64  `json:"last_producer_id"`
	LastEpoch       int16  `json:"last_epoch"`
	State           string `json:"state"`
	// Partitions are topic-partition names ("orders-3"); lists are never
	// null, so an inspector shows an empty one as empty.
	Partitions []string `json:"partitions"`
	Groups     []string `json:"groups"`
	TimeoutMs  int32    `json:"timeout_ms"`
	TxnStartMs int64    `json:"txn_start_ms"`
	// ReaperInMs is the time left before the timeout reaper aborts the
	// ongoing transaction (absent when none is ongoing).
	ReaperInMs *int64 `json:"reaper_in_ms,omitempty"`
	InFlight   bool   `json:"in_flight"`
	Persisted  bool   `json:"persisted"`
	// TV is the transaction version of the transaction (0 classic, 2
	// KIP-890 part 2: an epoch bump at every end).
	TV int8 `json:"tv"`
	// Held counts requests waiting in the actor: for a write, or for the
	// markers of the transition in flight (R-TXN-2).
	Held int `json:"held"`
}

// published is the actor's state as of its last message, read by the
// inspector from another goroutine. It shares the entry's slices with
// the state machine, which never writes into them (a transition builds
// new ones: txnstate.Entry.WithPartitions, WithGroup), so publishing
// costs no copy; the inspector's names are formatted when it asks.
type published struct {
	entry     txnstate.Entry
	inFlight  bool
	persisted bool
	held      int
}

// same reports whether p shows what q shows: the same scalars and the
// same partition and group lists (the same backing arrays, which are
// never written into).
func (p *published) same(q *published) bool {
	a, b := p.entry, q.entry
	return p.inFlight == q.inFlight && p.persisted == q.persisted && p.held == q.held &&
		a.TransactionalID == b.TransactionalID && a.ProducerID == b.ProducerID && a.Epoch == b.Epoch &&
		a.LastProducerID == b.LastProducerID && a.LastEpoch == b.LastEpoch && a.TimeoutMs == b.TimeoutMs &&
		a.State == b.State && a.TxnStartMs == b.TxnStartMs && a.LastUpdateMs == b.LastUpdateMs &&
		a.TV == b.TV && a.NextProducerID == b.NextProducerID &&
		sameSlice(a.Partitions, b.Partitions) && sameSlice(a.Groups, b.Groups)
}

func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Summary returns the state as last published.
func (a *txnActor) Summary() Summary {
	p := a.summary.Load()
	if p == nil {
		return Summary{TransactionalID: a.id}
	}
	e := p.entry
	tps := make([]string, len(e.Partitions))
	for i, tp := range e.Partitions {
		tps[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	out := Summary{
		TransactionalID: a.id, ProducerID: e.ProducerID, Epoch: e.Epoch,
		LastProducerID: e.LastProducerID, LastEpoch: e.LastEpoch, State: e.State.String(),
		Partitions: tps, Groups: append([]string{}, e.Groups...), TimeoutMs: e.TimeoutMs, TxnStartMs: e.TxnStartMs,
		InFlight: p.inFlight, Persisted: p.persisted, TV: e.TV, Held: p.held,
	}
	if e.State == txnstate.Ongoing {
		left := out.TxnStartMs + int64(out.TimeoutMs) - time.Now().UnixMilli()
		out.ReaperInMs = &left
	}
	return out
}

// publish makes the actor's state visible to Summary, after every
// message; a message that changed nothing shown publishes nothing.
func (a *txnActor) publish() {
	p := published{entry: a.t.Entry(), inFlight: a.t.InFlight(), persisted: a.t.Persisted(), held: a.held.Len()}
	if last := a.summary.Load(); last != nil && last.same(&p) {
		return
	}
	a.summary.Store(&p)
}
