// Package producers is a partition's idempotent and transactional producer
// state: per producer id the epoch, the window of the last five batches
// (duplicate detection), the coordinator epoch and the open transaction.
// It is pure bookkeeping, owned by one partition actor; the rules are
// spec/produce-validation.md (R-PV-5..15) and the fence ring (R-FEN-2).
package producers

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// WindowSize is how many recent batches per producer are kept for
// duplicate detection (Apache's NUM_BATCHES_TO_RETAIN).
const WindowSize = 5

// BatchMeta is one window element.
type BatchMeta struct {
	FirstSeq    int32 `json:"first_seq"`
	LastSeq     int32 `json:"last_seq"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	Timestamp   int64 `json:"timestamp"`
}

// Entry is the state of one producer id on one partition (R-PV-5).
type Entry struct {
	Epoch            int16       `json:"epoch"`
	Window           []BatchMeta `json:"window,omitempty"`
	CoordinatorEpoch int32       `json:"coordinator_epoch"`
	LastTimestamp    int64       `json:"last_timestamp"`
	TxnFirstOffset   int64       `json:"txn_first_offset"`
}

// LastSeq is the newest window element's last sequence, or -1.
func (e *Entry) LastSeq() int32 {
	if len(e.Window) == 0 {
		return -1
	}
	return e.Window[len(e.Window)-1].LastSeq
}

// HasOpenTxn reports an open transaction on this partition.
func (e *Entry) HasOpenTxn() bool { return e.TxnFirstOffset >= 0 }

// LastSequence computes a batch's last sequence with int32 wrap-around
// (R-PV-2).
func LastSequence(baseSeq, lastOffsetDelta int32) int32 {
	if baseSeq < 0 {
		return -1
	}
	if baseSeq <= math.MaxInt32-lastOffsetDelta {
		return baseSeq + lastOffsetDelta
	}
	return lastOffsetDelta - (math.MaxInt32 - baseSeq) - 1
}

// State is all producer entries of one partition plus the broker-wide fence
// floors.
type State struct {
	entries map[int64]*Entry
	floors  *Floors
}

// New returns an empty state consulting floors for every producer.
func New(floors *Floors) *State {
	if floors == nil {
		floors = NewFloors()
	}
	return &State{entries: make(map[int64]*Entry), floors: floors}
}

func (s *State) put(pid int64, e *Entry) { s.entries[pid] = e }

func (s *State) drop(pid int64) { delete(s.entries, pid) }

// EachEffective calls fn for every entry after applying the fence floors
// to it, so what is reported is what the next batch is checked against.
func (s *State) EachEffective(fn func(pid int64, e *Entry)) {
	for pid := range s.entries {
		fn(pid, s.lookup(pid))
	}
}

// Entry returns the entry for pid, or nil.
func (s *State) Entry(pid int64) *Entry { return s.entries[pid] }

// Len is the number of producer entries.
func (s *State) Len() int { return len(s.entries) }

// Each calls fn for every entry.
func (s *State) Each(fn func(pid int64, e *Entry)) {
	for pid, e := range s.entries {
		fn(pid, e)
	}
}

// lookup returns the entry for pid, materialising one from a fence floor
// (R-FEN-2: a partition with no entry behaves as if it had the fenced
// epoch with an empty window).
func (s *State) lookup(pid int64) *Entry {
	e := s.entries[pid]
	if floor, ok := s.floors.Get(pid); ok && (e == nil || e.Epoch < floor) {
		if e == nil {
			e = &Entry{Epoch: -1, CoordinatorEpoch: -1, LastTimestamp: -1, TxnFirstOffset: -1}
			s.put(pid, e)
		}
		e.Epoch = floor
		e.Window = nil
	}
	return e
}

// Decision is the outcome of checking a batch against producer state.
type Decision struct {
	Code      int16      // 0 = append (or duplicate)
	Duplicate *BatchMeta // set: answer with this element, append nothing (R-PV-7)
}

// Check classifies a data batch with a producer id (R-PV-7..10). It does not
// change state.
func (s *State) Check(h Batch) Decision {
	e := s.lookup(h.ProducerID)
	lastSeq := LastSequence(h.BaseSequence, h.LastOffsetDelta)
	if e != nil && e.Epoch == h.ProducerEpoch {
		for i := range e.Window {
			if w := &e.Window[i]; w.FirstSeq == h.BaseSequence && w.LastSeq == lastSeq && e.retryOf(h, w) {
				dup := *w
				return Decision{Duplicate: &dup}
			}
		}
	}
	if e != nil && e.Epoch >= 0 && h.ProducerEpoch < e.Epoch {
		return Decision{Code: kerr.InvalidProducerEpoch.Code}
	}
	if end, ok := s.floors.End(h.ProducerID); ok && h.ProducerEpoch < end {
		// R-TV2-7: the transaction at this epoch has ended (EndTxn may
		// have been answered before its marker reaches this partition);
		// only retries of its written batches, answered above, pass.
		return Decision{Code: kerr.InvalidProducerEpoch.Code}
	}
	switch {
	case e == nil || e.Epoch < 0:
		// R-PV-9a: unknown producer, any sequence starts it.
	case h.ProducerEpoch > e.Epoch:
		if h.BaseSequence != 0 {
			return Decision{Code: kerr.OutOfOrderSequenceNumber.Code}
		}
	default:
		last := int64(e.LastSeq())
		if !(int64(h.BaseSequence) == last+1 || (h.BaseSequence == 0 && last == math.MaxInt32)) {
			return Decision{Code: kerr.OutOfOrderSequenceNumber.Code}
		}
	}
	if e != nil && e.HasOpenTxn() && !h.IsTransactional() {
		return Decision{Code: kerr.InvalidTxnState.Code}
	}
	return Decision{}
}

// retryOf reports whether h may be a retry of window element w (R-PV-7a):
// a transactional batch is a retry only of a batch of the transaction
// open here now. A batch of a transaction a marker has ended is never the
// first attempt of a batch of a later one: under TV1 a client whose batch
// timed out may abort and send the next transaction's first batch with
// the same epoch and sequence, and answering it as a duplicate would
// acknowledge records that exist only in the aborted transaction. It is
// refused as out of order instead (the sequence check that follows).
// Apache answers such a batch as a duplicate; kaas does not.
func (e *Entry) retryOf(h Batch, w *BatchMeta) bool {
	return !h.IsTransactional() || e.HasOpenTxn() && w.FirstOffset >= e.TxnFirstOffset
}

// Apply records an appended data batch (R-PV-11). It returns true when the
// batch opened a transaction on this partition.
func (s *State) Apply(h Batch) (openedTxn bool) {
	e := s.entries[h.ProducerID]
	if e == nil {
		e = &Entry{Epoch: h.ProducerEpoch, CoordinatorEpoch: -1, TxnFirstOffset: -1}
		s.put(h.ProducerID, e)
	}
	if h.ProducerEpoch != e.Epoch {
		e.Epoch = h.ProducerEpoch
		e.Window = e.Window[:0]
	}
	if h.BaseSequence >= 0 {
		if len(e.Window) == WindowSize {
			copy(e.Window, e.Window[1:])
			e.Window = e.Window[:WindowSize-1]
		}
		e.Window = append(e.Window, BatchMeta{
			FirstSeq: h.BaseSequence, LastSeq: LastSequence(h.BaseSequence, h.LastOffsetDelta),
			FirstOffset: h.BaseOffset, LastOffset: h.LastOffset(), Timestamp: h.MaxTimestamp,
		})
	}
	e.LastTimestamp = h.MaxTimestamp
	if h.IsTransactional() && e.TxnFirstOffset < 0 {
		e.TxnFirstOffset = h.BaseOffset
		return true
	}
	return false
}

// CheckMarker validates a transaction marker against the producer's state
// (R-PV-13, R-MRK-4).
func (s *State) CheckMarker(pid int64, epoch int16, coordinatorEpoch int32) int16 {
	e := s.lookup(pid)
	if e == nil {
		return 0
	}
	if e.Epoch >= 0 && epoch < e.Epoch {
		return kerr.InvalidProducerEpoch.Code
	}
	if coordinatorEpoch < e.CoordinatorEpoch {
		return kerr.TransactionCoordinatorFenced.Code
	}
	return 0
}

// CompletedTxn is a transaction a marker closed on this partition.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the marker's offset
}

// ApplyMarker records an appended marker at offset and returns the
// transaction it completed, if one was open here.
func (s *State) ApplyMarker(pid int64, epoch int16, coordinatorEpoch int32, offset, timestamp int64) (CompletedTxn, bool) {
	e := s.lookup(pid)
	if e == nil {
		e = &Entry{Epoch: epoch, CoordinatorEpoch: coordinatorEpoch, LastTimestamp: timestamp, TxnFirstOffset: -1}
		s.put(pid, e)
		return CompletedTxn{}, false
	}
	if epoch > e.Epoch {
		e.Epoch = epoch
		e.Window = e.Window[:0]
	}
	e.CoordinatorEpoch = coordinatorEpoch
	if e.TxnFirstOffset < 0 {
		return CompletedTxn{}, false
	}
	done := CompletedTxn{ProducerID: pid, FirstOffset: e.TxnFirstOffset, LastOffset: offset}
	e.TxnFirstOffset = -1
	return done, true
}

// OpenTxnFirstOffset returns the smallest first offset of an open
// transaction, or -1.
func (s *State) OpenTxnFirstOffset() int64 {
	min := int64(-1)
	for _, e := range s.entries {
		if e.TxnFirstOffset >= 0 && (min < 0 || e.TxnFirstOffset < min) {
			min = e.TxnFirstOffset
		}
	}
	return min
}

// Expire drops entries without an open transaction whose last timestamp is
// older than cutoff (R-PV-14) and returns how many went.
func (s *State) Expire(cutoffMs int64) int {
	n := 0
	for pid, e := range s.entries {
		if e.TxnFirstOffset < 0 && e.LastTimestamp < cutoffMs {
			s.drop(pid)
			n++
		}
	}
	return n
}
