package offsetlog

// The slot's records as a reader of Apache's __consumer_offsets partition
// sees them (issue 24): every record the slot log holds, at a Kafka offset
// that is its sequence number minus one, compacted to the latest record
// per key as Apache's log cleaner leaves the topic, tombstones kept for
// Apache's delete.retention.ms (24 h) after they were written or the slot
// was last opened.
//
// Why sequence numbers: they are already the slot's durable order (every
// record is numbered when appended, a snapshot keeps each record's number
// and the next one to give, and a new owner recovers both from the shared
// volume), so an offset a reader saw is never taken back or reused across
// restarts, compactions and changes of owner.
//
// Only durable records are shown: an append enters the view once its fsync
// has covered it (Slot.Durable), so a crash never takes back what a reader
// saw. Transactional offsets are shown as a read_committed reader sees
// Apache's log: a staged record keeps its place but stays hidden, and the
// stable offset stops before the first one still pending; its producer's
// commit marker shows it (unless a newer record of its key is already
// there, as R-MRK-5 keeps the newer plain commit), an abort drops it. Both
// isolation levels read up to the stable offset.
//
// The view is read by fetches on other goroutines while the offsets writer
// (the slot's one owner) applies durable entries: a read-write lock held
// for in-memory work only guards it; records, once in, are immutable.

import (
	"encoding/binary"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TombstoneRetention is how long a tombstone stays visible: Apache's
// delete.retention.ms default, which __consumer_offsets keeps.
const TombstoneRetention = 24 * time.Hour

// ViewRecord is one record a reader sees.
type ViewRecord struct {
	Offset    int64
	Key       []byte
	Value     []byte // nil: a tombstone
	Timestamp int64  // ms
}

// View is one slot's records as the __consumer_offsets partition.
type View struct {
	mu      sync.RWMutex
	order   []*viewRecord // by sequence number, pending and dead ones too
	byKey   map[string]*viewRecord
	pending map[int64][]*viewRecord // staged by producer id, in order
	dead    int                     // records in order no reader sees
	end     uint64                  // the next sequence number applied
	changed chan struct{}           // closed and replaced on every change
	closed  bool
	now     func() time.Time
}

type viewRecord struct {
	seq   uint64
	key   string
	value []byte
	ts    int64
	// born is when a tombstone was written (or its slot opened): it is
	// dropped TombstoneRetention later.
	born    time.Time
	pending bool // staged, not yet committed
	dead    bool // superseded, aborted or expired
}

func newView(now func() time.Time) *View {
	if now == nil {
		now = time.Now
	}
	return &View{byKey: map[string]*viewRecord{}, pending: map[int64][]*viewRecord{}, end: 1, changed: make(chan struct{}), now: now}
}

// apply folds one durable entry in (its records numbered from firstSeq).
// Record bytes are copied: replay hands in slices of a recovery buffer.
func (v *View) apply(e *Entry, firstSeq uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if end := firstSeq + e.seqs(); end > v.end {
		v.end = end
	}
	switch e.Kind {
	case KindPlain:
		for i, r := range e.Records {
			rec := v.newRecord(firstSeq+uint64(i), r)
			v.supersede(rec)
			v.order = append(v.order, rec)
		}
	case KindTxn:
		for i, r := range e.Records {
			rec := v.newRecord(firstSeq+uint64(i), r)
			rec.pending = true
			v.pending[e.ProducerID] = append(v.pending[e.ProducerID], rec)
			v.order = append(v.order, rec)
		}
	case KindCommit, KindAbort:
		for _, rec := range v.pending[e.ProducerID] {
			rec.pending = false
			if cur := v.byKey[rec.key]; e.Kind == KindAbort || (cur != nil && cur.seq > rec.seq) {
				rec.dead = true
				v.dead++
				continue
			}
			v.supersede(rec)
		}
		delete(v.pending, e.ProducerID)
	}
	v.signal()
}

func (v *View) newRecord(seq uint64, r Record) *viewRecord {
	rec := &viewRecord{seq: seq, key: string(r.Key), ts: -1}
	if r.Value == nil {
		rec.born = v.now()
		rec.ts = rec.born.UnixMilli()
	} else {
		rec.value = append(make([]byte, 0, len(r.Value)), r.Value...)
		rec.ts = recordTimestamp(r.Key, r.Value)
	}
	return rec
}

// recordTimestamp is the time a record carries: an offset commit's commit
// time, group metadata's state time (v2+); -1 (none) otherwise.
func recordTimestamp(key, value []byte) int64 {
	if len(key) < 2 || len(value) < 2 {
		return -1
	}
	switch binary.BigEndian.Uint16(key) {
	case 0, 1:
		var ov kmsg.OffsetCommitValue
		if ov.ReadFrom(value) == nil {
			return ov.CommitTimestamp
		}
	case 2:
		var gv kmsg.GroupMetadataValue
		if gv.ReadFrom(value) == nil && gv.Version >= 2 {
			return gv.CurrentStateTimestamp
		}
	}
	return -1
}

// supersede makes rec its key's latest record.
func (v *View) supersede(rec *viewRecord) {
	if old := v.byKey[rec.key]; old != nil && !old.dead {
		old.dead = true
		v.dead++
	}
	v.byKey[rec.key] = rec
}

func (v *View) signal() {
	close(v.changed)
	v.changed = make(chan struct{})
}

// Changed is closed at the view's next change (or when it closes).
func (v *View) Changed() <-chan struct{} {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.changed
}

// close wakes every reader for good: the slot is no longer served here.
func (v *View) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.closed {
		v.closed = true
		close(v.changed)
	}
}

// Closed reports whether the slot was closed (handed off, or the broker
// is stopping): a reader must look the slot up again.
func (v *View) Closed() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.closed
}

// Offsets are the partition's log start (always 0: compaction leaves
// gaps, not a later start), high watermark and last stable offset.
func (v *View) Offsets() (logStart, highWatermark, lastStable int64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return 0, int64(v.end) - 1, v.stable()
}

// stable is the offset of the first pending record, or the high watermark.
func (v *View) stable() int64 {
	s := int64(v.end) - 1
	for _, recs := range v.pending {
		if len(recs) > 0 && int64(recs[0].seq)-1 < s {
			s = int64(recs[0].seq) - 1
		}
	}
	return s
}

// Read appends to dst the records a reader sees at offsets from on, below
// the last stable offset, until maxBytes of keys and values (at least one
// record, as a fetch returns at least one batch).
func (v *View) Read(dst []ViewRecord, from int64, maxBytes int) []ViewRecord {
	v.mu.RLock()
	defer v.mu.RUnlock()
	upTo := v.stable()
	i := sort.Search(len(v.order), func(i int) bool { return int64(v.order[i].seq)-1 >= from })
	bytes := 0
	cutoff := v.now().Add(-TombstoneRetention)
	for ; i < len(v.order); i++ {
		rec := v.order[i]
		off := int64(rec.seq) - 1
		if off >= upTo {
			break
		}
		if rec.dead || rec.pending || (rec.value == nil && rec.born.Before(cutoff)) {
			continue
		}
		n := len(rec.key) + len(rec.value)
		if bytes > 0 && bytes+n > maxBytes {
			break
		}
		bytes += n
		dst = append(dst, ViewRecord{Offset: off, Key: []byte(rec.key), Value: rec.value, Timestamp: rec.ts})
	}
	return dst
}

// OffsetForTime is ListOffsets by timestamp: the first visible record
// below the stable offset whose timestamp is at least ts, and its
// timestamp; -1, -1 if none.
func (v *View) OffsetForTime(ts int64) (offset, timestamp int64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	upTo := v.stable()
	for _, rec := range v.order {
		if int64(rec.seq)-1 >= upTo {
			break
		}
		if !rec.dead && !rec.pending && rec.ts >= ts {
			return int64(rec.seq) - 1, rec.ts
		}
	}
	return -1, -1
}

// MaxTimestamp is ListOffsets' MAX_TIMESTAMP (-3): the visible record with
// the largest timestamp (the first of equals), or -1, -1.
func (v *View) MaxTimestamp() (offset, timestamp int64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	upTo := v.stable()
	offset, timestamp = -1, -1
	for _, rec := range v.order {
		if int64(rec.seq)-1 >= upTo {
			break
		}
		if !rec.dead && !rec.pending && rec.ts > timestamp {
			offset, timestamp = int64(rec.seq)-1, rec.ts
		}
	}
	return offset, timestamp
}

// Len is how many records a reader can see (tombstones included).
func (v *View) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.order) - v.dead
}

// clean drops dead records and expired tombstones from the order once they
// are most of it, so memory follows the live records (and the tombstones
// of the last day), not everything ever written.
func (v *View) clean(force bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	cutoff := v.now().Add(-TombstoneRetention)
	for _, rec := range v.order {
		if !rec.dead && rec.value == nil && rec.born.Before(cutoff) {
			rec.dead = true
			v.dead++
			if v.byKey[rec.key] == rec {
				delete(v.byKey, rec.key)
			}
		}
	}
	if !force && (v.dead < 1024 || v.dead*2 < len(v.order)) {
		return
	}
	keep := make([]*viewRecord, 0, len(v.order)-v.dead)
	for _, rec := range v.order {
		if !rec.dead {
			keep = append(keep, rec)
		}
	}
	v.order, v.dead = keep, 0
}

// snapshot is the records a compacted log must keep for the view (and so
// for the state replayed from it) to come back the same: every live
// record and unexpired tombstone at its own sequence number, the staged
// ones as their producers' transactional entries.
func (v *View) snapshot() []SeqEntry {
	v.clean(true)
	v.mu.RLock()
	defer v.mu.RUnlock()
	staged := map[*viewRecord]int64{}
	for pid, recs := range v.pending {
		for _, rec := range recs {
			staged[rec] = pid
		}
	}
	out := make([]SeqEntry, 0, len(v.order))
	for _, rec := range v.order {
		r := Record{Key: []byte(rec.key), Value: rec.value}
		if pid, ok := staged[rec]; ok {
			out = append(out, SeqEntry{Entry{Kind: KindTxn, ProducerID: pid, Records: []Record{r}}, rec.seq})
			continue
		}
		out = append(out, SeqEntry{Entry{Kind: KindPlain, Records: []Record{r}}, rec.seq})
	}
	return out
}

// missing lists the records of recs whose keys the view does not hold:
// records a log written before sequence numbers were kept for group
// metadata held at no place of their own.
func (v *View) missing(recs []Record) []Record {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []Record
	seen := map[string]bool{}
	for i := len(recs) - 1; i >= 0; i-- { // the last of a key wins
		k := string(recs[i].Key)
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, ok := v.byKey[k]; !ok && recs[i].Value != nil {
			out = append(out, Record{Key: []byte(k), Value: append([]byte(nil), recs[i].Value...)})
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
