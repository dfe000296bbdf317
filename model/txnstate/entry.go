// Package txnstate is a transactional id's coordinator state: the entry
// the transaction coordinator's state machine (state/txncoord) moves
// through its states, the transaction log (storage/txnlog) persists as
// JSON, actors carry and the broker describes. One type for all of them,
// so no layer converts; the JSON names are the log's record format.
package txnstate

import (
	"sort"

	"kaas/model"
)

// State is a coordinator entry's state (spec R-TXN-1; ids as Apache's
// DescribeTransactions shows them).
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
	PrepareEpochFence
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) String() string {
	if int(s) < len(stateNames) && s >= 0 {
		return stateNames[s]
	}
	return "Unknown"
}

// IsPrepare reports PrepareCommit or PrepareAbort.
func (s State) IsPrepare() bool { return s == PrepareCommit || s == PrepareAbort }

// IsComplete reports CompleteCommit or CompleteAbort.
func (s State) IsComplete() bool { return s == CompleteCommit || s == CompleteAbort }

// Entry is a transactional id's coordinator state (R-IPI-5), all of it
// persisted on every transition (lastProducerId/lastEpoch too, U-1).
type Entry struct {
	TransactionalID string                 `json:"id"`
	ProducerID      int64                  `json:"pid"`
	Epoch           int16                  `json:"epoch"`
	LastProducerID  int64                  `json:"last_pid"`
	LastEpoch       int16                  `json:"last_epoch"`
	TimeoutMs       int32                  `json:"timeout_ms"`
	State           State                  `json:"state"`
	Partitions      []model.TopicPartition `json:"partitions,omitempty"`
	Groups          []string               `json:"groups,omitempty"`
	TxnStartMs      int64                  `json:"txn_start_ms"`
	LastUpdateMs    int64                  `json:"last_update_ms"`
	// TV is the transaction version the client runs this transaction
	// under (Apache's clientTransactionVersion): 2 once it used EndTxn
	// v5, Produce v12 or TxnOffsetCommit v5; 0 for the classic protocol.
	TV int8 `json:"tv,omitempty"`
	// NextProducerID is the producer id a TV2 EndTxn rotates to because
	// the epoch is exhausted, carried by the Prepare* entry until
	// Complete* takes it up (0: none).
	NextProducerID int64 `json:"next_pid,omitempty"`
}

// HasPartition reports whether tp is in the transaction.
func (e *Entry) HasPartition(tp model.TopicPartition) bool {
	i := sort.Search(len(e.Partitions), func(i int) bool { return !lessTP(e.Partitions[i], tp) })
	return i < len(e.Partitions) && e.Partitions[i] == tp
}

// WithPartitions returns the partition set with tps added, sorted, and
// whether anything was new.
func (e *Entry) WithPartitions(tps []model.TopicPartition) ([]model.TopicPartition, bool) {
	out := append([]model.TopicPartition(nil), e.Partitions...)
	added := false
	for _, tp := range tps {
		if !e.HasPartition(tp) && !containsTP(out[len(e.Partitions):], tp) {
			out = append(out, tp)
			added = true
		}
	}
	sort.Slice(out, func(i, j int) bool { return lessTP(out[i], out[j]) })
	return out, added
}

// WithGroup returns the group list with g added.
func (e *Entry) WithGroup(g string) []string {
	for _, have := range e.Groups {
		if have == g {
			return e.Groups
		}
	}
	return append(append([]string(nil), e.Groups...), g)
}

func containsTP(tps []model.TopicPartition, tp model.TopicPartition) bool {
	for _, t := range tps {
		if t == tp {
			return true
		}
	}
	return false
}

func lessTP(a, b model.TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// Clone copies an entry so a transition can be prepared without touching
// the current one.
func (e Entry) Clone() Entry {
	e.Partitions = append([]model.TopicPartition(nil), e.Partitions...)
	e.Groups = append([]string(nil), e.Groups...)
	return e
}
