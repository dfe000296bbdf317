// Package txncoord is the transaction coordinator's state machine for one
// transactional id (spec init-producer-id.md and transactions.md): the
// InitProducerId bump, rotation and rejoin-abort, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, the marker round that completes a transaction,
// the timeout reaper's abort and expiry.
//
// It does no I/O, starts no goroutine and reads no clock: every method
// takes the current time and returns a Step, the effects its caller (the
// actor in actors/txn) must carry out — persist this entry, fence this
// (producer id, epoch), write these markers, answer this request, call
// back later — and report back through PersistDone, FenceDone, MarkerDone
// and Fire. The only thing it calls is the producer id allocator it is
// handed. A transition whose effects are outstanding is "in flight"
// (R-TXN-2).
package txncoord

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/model/slots"
	"kaas/model/txnstate"
)

// OffsetsTopic is the name Apache gives the group offsets partitions that
// AddOffsetsToTxn adds to a transaction.
const OffsetsTopic = "__consumer_offsets"

// PIDs allocates producer ids (R-IPI-4).
type PIDs interface{ Next() (int64, error) }

// Txn is one transactional id's coordinator state: the entry as last
// persisted, plus what lives in memory only (R-IPI-5): the transition in
// flight and the failed fence (R-IPI-14).
type Txn struct {
	id        string
	log       *slog.Logger
	entry     txnstate.Entry
	persisted bool // the entry exists in the store (false: in memory only, or none)

	// failedFence (R-IPI-14): persisting a fence transition failed; the
	// entry's epoch counts as fenceEpoch for client checks while Ongoing,
	// and the next fence attempt reuses it.
	failedFence bool
	fenceEpoch  int16

	op    *op // the transition in flight, nil when none
	round int // marker rounds started, so stale results can be told apart
	// unconfirmed counts Step.Unconfirmed writes whose outcome has not
	// been reported (UnconfirmedDone).
	unconfirmed int
	// completeDue: the entry is a Complete* not handed to the store yet
	// (complete says why it waits); completeArmed: the Tick that writes
	// it is on its way.
	completeDue, completeArmed bool
	endFences                  int // end fences started, so stale outcomes can be told apart
}

// New is the state of id as loaded from the store; persisted false means
// there is no entry yet (the zero Entry). log may be nil.
func New(id string, e txnstate.Entry, persisted bool, log *slog.Logger) *Txn {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if !persisted {
		e = txnstate.Entry{}
	}
	return &Txn{id: id, log: log, entry: e, persisted: persisted}
}

// Entry is the current entry (as last persisted, or the fresh in-memory
// one of R-IPI-6).
func (t *Txn) Entry() txnstate.Entry { return t.entry }

// Persisted reports whether the entry exists in the store.
func (t *Txn) Persisted() bool { return t.persisted }

// InFlight reports whether a transition is in flight (R-TXN-2).
func (t *Txn) InFlight() bool { return t.op != nil }

// Persisting reports whether the transition in flight is waiting for a
// write. The caller holds requests back meanwhile and hands them in once
// PersistDone has been called: a request never meets a half-written
// transition (it would otherwise get CONCURRENT_TRANSACTIONS, R-TXN-2).
func (t *Txn) Persisting() bool { return t.op != nil && t.op.persisting }

// Stable reports whether the entry can be left to the store alone: no
// transition in flight and nothing the reaper or a resume must watch
// (the actor holding it may stop).
func (t *Txn) Stable() bool {
	if t.op != nil || t.unconfirmed > 0 || t.completeDue {
		return false
	}
	s := t.entry.State
	return !t.persisted || s == txnstate.Empty || s.IsComplete()
}

// Step is what the caller must do after a call, in this order: start the
// fence, start the write, send the markers, arrange the callback, answer.
// Each started effect is reported back (FenceDone, PersistDone,
// MarkerDone, Fire); they may complete in any order.
type Step struct {
	Fence *Fence
	// EndFence (a TV2 end, R-TV2-7) asks for new data of the ended epoch
	// to be refused on every partition of the transaction, concurrently
	// with Persist; reported through EndFenceDone. EndFenceDrop says it
	// is no longer needed (every marker is durable).
	EndFence     *EndFence
	EndFenceDrop *EndFence
	Persist      *txnstate.Entry
	// Unconfirmed: nothing waits for Persist; its outcome is reported
	// through UnconfirmedDone, not PersistDone (Complete*, see complete).
	Unconfirmed bool
	// Delete removes the entry from the store (expiry); reported through
	// PersistDone like a write.
	Delete  bool
	Markers []Marker
	Later   *Later
	Answer  *Answer
	Events  []Event
	// Bump describes the epoch bump Events counts, for the inspector's
	// timeline (reported once durable, as Events is).
	Bump *Bump
}

// Bump is one epoch handed out or fenced one higher: whose, from what to
// what, and why.
type Bump struct {
	ProducerID     int64
	Epoch          int16
	PrevProducerID int64 // the exhausted producer id a rotation replaced; else ProducerID
	PrevEpoch      int16
	Reason         BumpReason
}

// BumpReason says why an epoch was bumped.
type BumpReason string

const (
	Rejoin      BumpReason = "rejoin"       // InitProducerId on an existing producer id (R-IPI-11)
	RejoinAbort BumpReason = "rejoin-abort" // InitProducerId mid-transaction: abort at a bumped epoch (R-IPI-10)
	Reaper      BumpReason = "reaper"       // the transaction timed out: abort at a bumped epoch (R-TXN-9)
	Rotation    BumpReason = "rotation"     // the epoch was exhausted: a fresh producer id (R-IPI-12, R-TV2-3)
	EndTxnBump  BumpReason = "end-txn"      // a TV2 EndTxn: every end bumps the epoch (R-TV2-2)
)

// Fence asks for (ProducerID, Epoch) to be fenced everywhere (R-FEN-1).
type Fence struct {
	ProducerID int64
	Epoch      int16
}

// EndFence asks every partition in Partitions to refuse new data batches
// of ProducerID below Epoch (R-TV2-7); Seq tells its outcome apart.
type EndFence struct {
	Seq        int
	ProducerID int64
	Epoch      int16
	Partitions []model.TopicPartition
}

// Marker is one marker of a round (R-MRK-1): a COMMIT or ABORT marker to a
// data partition, or (Key.Groups) the commit or discard of the pending
// transactional offsets of Groups (R-MRK-5).
type Marker struct {
	Round      int
	Key        MarkerKey
	ProducerID int64
	Epoch      int16
	Commit     bool
	Groups     []string
	Slots      []int32 // the offsets slots in the transaction (Key.Groups)
}

// MarkerKey names one marker of a round.
type MarkerKey struct {
	TP     model.TopicPartition
	Groups bool
}

// Later asks for Fire(Tick) after After.
type Later struct {
	After time.Duration
	Tick  Tick
}

// Tick is a callback the machine asked for: Key is the marker to send
// again, (Rewrite) the Complete* entry to write again, or (Complete) the
// Complete* entry to write if no later transition's write has covered it.
type Tick struct {
	Round    int
	Key      MarkerKey
	Rewrite  bool
	Complete bool
}

// Answer is the reply to a request: To is the token the request was
// handed in with. ProducerID and Epoch are InitProducerId's (-1 on
// errors, R-IPI-7); Partitions is AddPartitionsToTxn's per-partition
// codes when Code is 0.
type Answer struct {
	To         any
	Code       int16
	ProducerID int64
	Epoch      int16
	Partitions []int16
}

// Event is something to count.
type Event int

const (
	EpochBump      Event = iota + 1 // an epoch handed out or fenced one higher
	EpochRotation                   // a fresh producer id for an exhausted epoch
	Committed                       // CompleteCommit persisted
	Aborted                         // CompleteAbort persisted
	ReaperAbort                     // the timeout reaper aborted a transaction
	EarlyEnd                        // a TV2 EndTxn answered before its markers (R-TV2-7)
	EndFenceFailed                  // an end fence not acknowledged everywhere
)

const (
	// MarkerRetryBackoff is the wait before a marker that failed with a
	// retriable error is sent again (R-MRK-1).
	MarkerRetryBackoff = 100 * time.Millisecond
	// RewriteBackoff is the wait before a Complete* whose write was
	// refused (ErrRefused) is written again.
	RewriteBackoff = time.Second
	// CompleteDelay is how long a Complete* entry waits for the id's
	// next transition to write a whole entry over it before it is
	// written on its own (complete).
	CompleteDelay = 10 * time.Millisecond
)

// ErrRefused is what a store's error wraps when it refused a write
// without taking the log offline: a cluster broker whose lease is in
// doubt writes nothing, and writes again once it is certainly alive.
var ErrRefused = errors.New("write refused for now")

type opKind int

const (
	opAdd        opKind = iota + 1 // AddPartitionsToTxn / AddOffsetsToTxn: Ongoing
	opBump                         // InitProducerId: bump or rotation (+ fence)
	opFenceAbort                   // rejoin-abort or timeout: PrepareAbort, fence, markers, CompleteAbort
	opEnd                          // EndTxn: Prepare*, markers, Complete*
	opResume                       // markers of a Prepare* entry found at start
	opExpire                       // expiry: the entry is deleted
)

// op is the transition in flight.
type op struct {
	kind opKind
	to   any // who gets the answer; nil for none (reaper, resume)

	persisting bool
	next       txnstate.Entry // the entry being written
	fencing    bool

	// opBump
	persistFailed bool
	fenceFailed   bool
	events        []Event // counted once the write is durable
	bump          *Bump   // reported with events (opBump), or once PrepareAbort is durable (opFenceAbort)

	// opFenceAbort: the epoch being fenced
	fenceEpoch int16

	// the marker round (opFenceAbort, opEnd, opResume)
	commit  bool
	pending map[MarkerKey]bool

	// answer is sent when the transition ends well.
	answer *Answer

	// opEnd of a TV2 client (R-TV2-7): the end fence started with
	// Prepare*, and whether every partition has acknowledged it. Once
	// both it and Prepare* are done, EndTxn is answered; the markers
	// follow behind.
	endFence   *EndFence
	endFenced  bool
	endPending bool // the fence's outcome is still to come
}

// exhausted is R-IPI's exhaustion: an epoch at or above int16 max − 1;
// 32767 is kept back for fencing.
func exhausted(epoch int16) bool { return epoch >= 32766 }

// clientEpoch is the epoch client requests are checked against: the
// failed fence's epoch while an Ongoing entry has one (R-IPI-14).
func (t *Txn) clientEpoch() int16 {
	if t.failedFence && t.entry.State == txnstate.Ongoing {
		return t.fenceEpoch
	}
	return t.entry.Epoch
}

// checkProducer is the PID/epoch check of the transaction APIs (R-TXN-4
// step 4, R-TXN-7 step 2): INVALID_PRODUCER_ID_MAPPING, then
// PRODUCER_FENCED (the handler maps it to INVALID_PRODUCER_EPOCH for old
// versions, R-GEN-2).
func (t *Txn) checkProducer(pid int64, epoch int16) int16 {
	if !t.persisted || pid != t.entry.ProducerID {
		return kerr.InvalidProducerIDMapping.Code
	}
	if epoch != t.clientEpoch() {
		return kerr.ProducerFenced.Code
	}
	return 0
}

// begin starts a transition writing next.
func (t *Txn) begin(o *op, next txnstate.Entry, now time.Time) Step {
	next.LastUpdateMs = now.UnixMilli()
	o.next, o.persisting = next, true
	t.op = o
	return Step{Persist: &o.next}
}

// durable makes the written entry the current one. A Complete* still
// due is covered: the entry written came after it.
func (t *Txn) durable(o *op) {
	t.entry = o.next
	t.persisted = true
	t.completeDue = false
}

// PersistDone reports the outcome of the write (or delete) the last Step
// asked for. A failed write leaves the entry as it was (R-GEN-3).
func (t *Txn) PersistDone(err error, now time.Time) Step {
	o := t.op
	if o == nil || !o.persisting {
		return Step{}
	}
	o.persisting = false
	switch o.kind {
	case opAdd:
		t.op = nil
		if err != nil {
			return t.answerOp(o, kerr.CoordinatorNotAvailable.Code)
		}
		t.durable(o)
		return Step{Answer: o.answer}
	case opBump:
		if err != nil {
			o.persistFailed = true
			return t.finishBump()
		}
		t.durable(o)
		s := t.finishBump()
		s.Events = append(o.events, s.Events...)
		s.Bump = o.bump
		return s
	case opFenceAbort, opEnd, opResume:
		return t.prepared(o, err, now)
	case opExpire:
		t.op = nil
		if err == nil {
			t.entry, t.persisted, t.completeDue = txnstate.Entry{}, false, false
		}
		return Step{}
	}
	return Step{}
}

// FenceDone reports the outcome of the fence the last Step asked for.
func (t *Txn) FenceDone(err error, now time.Time) Step {
	o := t.op
	if o == nil || !o.fencing {
		return Step{}
	}
	o.fencing = false
	switch o.kind {
	case opBump:
		o.fenceFailed = err != nil
		return t.finishBump()
	case opFenceAbort:
		if err != nil && o.answer != nil {
			o.answer.Code = kerr.CoordinatorNotAvailable.Code
		}
		// The markers go out whatever the fence did: PrepareAbort is
		// durable and must complete (R-TXN-3).
		return t.startMarkers(o, false, now)
	}
	return Step{}
}

// answerOp answers o's request with an error code.
func (t *Txn) answerOp(o *op, code int16) Step {
	if o.to == nil {
		return Step{}
	}
	return Step{Answer: errorAnswer(o.to, code)}
}

// errorAnswer is an error reply (R-IPI-7: producer id and epoch -1).
func errorAnswer(to any, code int16) *Answer {
	return &Answer{To: to, Code: code, ProducerID: -1, Epoch: -1}
}

func answer(to any, code int16) Step { return Step{Answer: errorAnswer(to, code)} }

// Verify is R-PV-6 (transactional produce) and R-TXN-11 (TxnOffsetCommit)
// against the persisted entry (persisted before the client heard of the
// transition): (producerID, epoch) must be the entry's producer and tp in
// its ongoing transaction. inPrepare is the code while it is ending.
func Verify(e txnstate.Entry, exists bool, producerID int64, epoch int16, tp model.TopicPartition, inPrepare int16) int16 {
	switch {
	case !exists || e.ProducerID != producerID:
		return kerr.InvalidProducerIDMapping.Code
	case e.Epoch != epoch:
		return kerr.InvalidProducerEpoch.Code
	case e.State.IsPrepare():
		return inPrepare
	case e.State != txnstate.Ongoing || !e.HasPartition(tp):
		return kerr.InvalidTxnState.Code
	}
	return 0
}

// OffsetsPartition is the group's offsets partition that AddOffsetsToTxn
// adds to a transaction (R-TXN-6).
func OffsetsPartition(group string) model.TopicPartition {
	return model.TopicPartition{Topic: OffsetsTopic, Partition: int32(slots.Of(group))}
}
