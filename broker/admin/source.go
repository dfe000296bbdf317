package admin

import (
	"context"
	"time"
)

// Source is what the broker tells the inspector beyond its actors'
// mailboxes: who it is, its partitions and transactions, the fences in
// force, and how an actor relates to others. Every method reads published
// state or asks with a deadline; none may wait on an actor unboundedly.
type Source interface {
	Identity() Identity
	// Partitions lists every partition from its published view (no
	// actor is asked).
	Partitions() []Partition
	// Transactions lists the coordinator's transactional ids, running
	// or not.
	Transactions() []Transaction
	// Producers is DescribeProducers for one partition (asks its actor).
	Producers(ctx context.Context, topic string, partition int32) ([]Producer, error)
	// Fences is the fence broadcaster's published state.
	Fences() Fences
	// Relations are the actors related to one (links) and facts that live
	// outside its state (a group's committed offsets); state is what its
	// state function returned.
	Relations(ctx context.Context, kind, name string, state any) Relations
	// Dormant is the state of an actor that is not running but could be
	// (a passivated transactional id, read from the coordinator's store).
	Dormant(name string) (state any, ok bool)
}

// Identity names the broker.
type Identity struct {
	BrokerID   int32     `json:"broker_id"`
	ClusterID  string    `json:"cluster_id"`
	Version    string    `json:"version"`
	Listen     string    `json:"listen"`
	Advertised string    `json:"advertised"`
	Admin      string    `json:"admin"`
	DataDir    string    `json:"data_dir"`
	Started    time.Time `json:"started"`
	GoVersion  string    `json:"go_version"`
	PID        int       `json:"pid"`
}

// Partition is one partition's published offsets.
type Partition struct {
	Actor         string `json:"actor"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	LogStart      int64  `json:"log_start_offset"`
	HighWatermark int64  `json:"high_watermark"`
	LastStable    int64  `json:"last_stable_offset"`
	LogEnd        int64  `json:"log_end_offset"`
	SizeBytes     int64  `json:"size_bytes"`
	Segments      int    `json:"segments"`
	ProducerIDs   int    `json:"producer_ids"`
}

// Name is topic-partition.
func (p Partition) Name() string { return tpName(p.Topic, p.Partition) }

// Transaction is one transactional id's coordinator entry.
type Transaction struct {
	TransactionalID string `json:"transactional_id"`
	Actor           string `json:"actor"`
	Running         bool   `json:"running"` // its actor is live (else passivated)
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	// LastProducerID and LastEpoch are the identity before the latest
	// bump (what a retried InitProducerId may claim).
	LastProducerID int64  `json:"last_producer_id"`
	LastEpoch      int16  `json:"last_epoch"`
	State          string `json:"state"`
	// Partitions are topic-partition names.
	Partitions   []string `json:"partitions"`
	Groups       []string `json:"groups"`
	TimeoutMs    int32    `json:"timeout_ms"`
	StartMs      int64    `json:"txn_start_ms"` // -1: no transaction
	LastUpdateMs int64    `json:"last_update_ms"`
}

// Open reports a transaction that has begun and not completed.
func (t Transaction) Open() bool {
	switch t.State {
	case "Ongoing", "PrepareCommit", "PrepareAbort":
		return true
	}
	return false
}

// Producer is one producer id's state on a partition (DescribeProducers).
type Producer struct {
	ProducerID       int64 `json:"producer_id"`
	Epoch            int16 `json:"epoch"`
	LastSequence     int32 `json:"last_sequence"`
	LastTimestamp    int64 `json:"last_timestamp"`
	CoordinatorEpoch int32 `json:"coordinator_epoch"`
	// TxnStartOffset is the first offset of its open transaction here, -1
	// if none.
	TxnStartOffset int64 `json:"txn_start_offset"`
}

// Fences is the fence state in force on this broker.
type Fences struct {
	OwnFile    string `json:"own_file"`
	OwnEntries int    `json:"own_entries"`
	// Floors are in force on every local partition at once.
	Floors    []Floor    `json:"floors"`
	PeerFiles []PeerFile `json:"peer_files"`
	PollLagMs float64    `json:"poll_lag_ms"`
}

// Floor is the lowest epoch a fenced producer id may still use here.
type Floor struct {
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	TransactionalID string `json:"transactional_id,omitempty"`
}

// PeerFile is a peer broker's fence file as last read.
type PeerFile struct {
	File        string    `json:"file"`
	Entries     int       `json:"entries"`
	Modified    time.Time `json:"modified"`
	LastApplied time.Time `json:"last_applied,omitzero"`
	LagMs       float64   `json:"lag_ms"`
}

// Relations link an actor to others.
type Relations struct {
	Links []Link `json:"links"`
	// Offsets are a group's committed offsets.
	Offsets []GroupOffset `json:"offsets,omitempty"`
}

// Link names a related actor. Actor is empty for something that has no
// actor (an idempotent producer).
type Link struct {
	Rel   string `json:"rel"`
	Actor string `json:"actor,omitempty"`
	Label string `json:"label"`
	Live  bool   `json:"live"`
}

// GroupOffset is one committed offset of a group, with the partition's
// end for the lag.
type GroupOffset struct {
	Partition string `json:"partition"`
	Actor     string `json:"actor"`
	Offset    int64  `json:"offset"`
	LogEnd    int64  `json:"log_end_offset"`
	Lag       int64  `json:"lag"`
	Metadata  string `json:"metadata,omitempty"`
}

func tpName(topic string, p int32) string { return topic + "-" + itoa(int64(p)) }
