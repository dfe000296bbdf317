package txn

import (
	"fmt"
	"time"

	"kaas/model/txnstate"
)

// Summary is a transactional id's state for the inspector, published after
// every message the actor handles.
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

// Summary returns the last published summary.
func (a *txnActor) Summary() Summary {
	if s := a.summary.Load(); s != nil {
		out := *s
		if out.State == txnstate.Ongoing.String() {
			left := out.TxnStartMs + int64(out.TimeoutMs) - time.Now().UnixMilli()
			out.ReaperInMs = &left
		}
		return out
	}
	return Summary{TransactionalID: a.id}
}

func (a *txnActor) publish() {
	e := a.t.Entry()
	tps := make([]string, len(e.Partitions))
	for i, tp := range e.Partitions {
		tps[i] = fmt.Sprintf("%s-%d", tp.Topic, tp.Partition)
	}
	a.summary.Store(&Summary{
		TransactionalID: a.id, ProducerID: e.ProducerID, Epoch: e.Epoch,
		LastProducerID: e.LastProducerID, LastEpoch: e.LastEpoch, State: e.State.String(),
		Partitions: tps, Groups: append([]string{}, e.Groups...), TimeoutMs: e.TimeoutMs, TxnStartMs: e.TxnStartMs,
		InFlight: a.t.InFlight(), Persisted: a.t.Persisted(), TV: e.TV, Held: a.held.Len(),
	})
}
