// Package events is the broker's journal of rare, notable events — KIP-360
// epoch bumps and why, fences applied (local and from peers' fence
// files), zombie batches rejected — kept in small bounded rings for the
// inspector's timelines.
//
// Recording never blocks and never waits for a reader: an event claims a
// slot with one atomic add and is published with one atomic store, so the
// actors can record from their hot paths' rare branches (a rejected
// zombie) without a lock. Each kind has its own ring, so a flood of one
// kind (a zombie producer retrying) cannot push the epoch bumps out.
package events

import (
	"sort"
	"sync/atomic"
	"time"
)

// Kind names what happened.
type Kind string

const (
	// EpochBump: the coordinator gave a producer a new epoch (or a new
	// producer id): Reason is rejoin, rejoin-abort, reaper or rotation.
	EpochBump Kind = "epoch_bump"
	// Fence: a (producer id, epoch) fence was put in force on every local
	// partition; Reason is local (this broker's coordinator) or peer (a
	// peer's fence file, named by Where).
	Fence Kind = "fence"
	// ZombieRejected: a partition refused a batch from a fenced or stale
	// producer epoch; Where is the partition, Code the Kafka error.
	ZombieRejected Kind = "zombie_rejected"
)

// Kinds lists every kind, in the order the journal keeps their rings.
var Kinds = [numKinds]Kind{EpochBump, Fence, ZombieRejected}

const numKinds = 3

// Reasons an epoch bump happens (Event.Reason of an EpochBump).
const (
	ReasonRejoin      = "rejoin"       // InitProducerId on an existing producer (KIP-360)
	ReasonRejoinAbort = "rejoin-abort" // InitProducerId mid-transaction: abort at a bumped epoch
	ReasonReaper      = "reaper"       // the transaction timed out: abort at a bumped epoch
	ReasonRotation    = "rotation"     // the epoch was exhausted: a fresh producer id
)

// Event is one journal entry. Fields a kind does not use are left zero
// and omitted from JSON, except the epochs, which every kind sets.
type Event struct {
	Seq        uint64    `json:"seq"`
	At         time.Time `json:"at"`
	Kind       Kind      `json:"kind"`
	ProducerID int64     `json:"producer_id"`
	// Epoch is the new epoch (bump), the fenced epoch (fence) or the
	// rejected batch's epoch (zombie).
	Epoch int16 `json:"epoch"`
	// PrevEpoch is the epoch before the bump, the floor before the fence
	// (-1: none), or the epoch in force when the zombie was rejected.
	PrevEpoch int16 `json:"prev_epoch"`
	// PrevProducerID is the producer id a rotation replaced.
	PrevProducerID  int64  `json:"prev_producer_id,omitempty"`
	Reason          string `json:"reason,omitempty"`
	TransactionalID string `json:"transactional_id,omitempty"`
	// Where is the partition (zombie) or the peer's fence file (fence).
	Where string `json:"where,omitempty"`
	// Code is the Kafka error name sent back (zombie).
	Code string `json:"code,omitempty"`
	// LagMs is how long a peer's fence took to arrive (file written →
	// applied here), or how long a local fence took to be in force.
	LagMs float64 `json:"lag_ms,omitempty"`
}

// Capacity is how many events of each kind the journal keeps.
const Capacity = 512

// Journal keeps the latest Capacity events of each kind. The zero value
// is not usable; a nil *Journal records nothing (tests and tools that
// do not watch events).
type Journal struct {
	seq   atomic.Uint64
	rings [numKinds]ring // indexed like Kinds
}

type ring struct {
	next   atomic.Uint64 // slots claimed
	stored atomic.Uint64 // events published (after their slot is stored)
	slots  [Capacity]atomic.Pointer[Event]
}

// New returns an empty journal.
func New() *Journal { return &Journal{} }

func kindIndex(k Kind) int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return -1
}

// Record adds e (its Seq is assigned; a zero At is now). It never blocks.
func (j *Journal) Record(e Event) {
	if j == nil {
		return
	}
	i := kindIndex(e.Kind)
	if i < 0 {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.Seq = j.seq.Add(1)
	r := &j.rings[i]
	slot := r.next.Add(1) - 1
	r.slots[slot%Capacity].Store(&e)
	r.stored.Add(1)
}

// Version changes whenever an event is published: a reader that saw the
// same version has seen every event there is.
func (j *Journal) Version() uint64 {
	if j == nil {
		return 0
	}
	var v uint64
	for i := range j.rings {
		v += j.rings[i].stored.Load()
	}
	return v
}

// Recorded is how many events of kind k were ever recorded (including
// those the ring has since dropped).
func (j *Journal) Recorded(k Kind) uint64 {
	if i := kindIndex(k); j != nil && i >= 0 {
		return j.rings[i].stored.Load()
	}
	return 0
}

// Events returns the kept events of the given kinds (none: every kind),
// oldest first.
func (j *Journal) Events(kinds ...Kind) []Event {
	if j == nil {
		return nil
	}
	if len(kinds) == 0 {
		kinds = Kinds[:]
	}
	var out []Event
	for _, k := range kinds {
		i := kindIndex(k)
		if i < 0 {
			continue
		}
		r := &j.rings[i]
		for s := range r.slots {
			if e := r.slots[s].Load(); e != nil {
				out = append(out, *e)
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Seq < out[b].Seq })
	return out
}
