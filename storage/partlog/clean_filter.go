package partlog

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sort"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What a pass keeps of each batch: Apache's LogCleaner.cleanInto filter
// (checkBatchRetention, shouldRetainRecord) and MemoryRecords.filterTo.

// filterBatch returns what to write for one batch (nil: nothing), whether
// that is the batch as it was, and the delete horizon the written batch
// carries (0: none). out may be batch itself: write it before the next
// batch is read.
func (p *CleanPlan) filterBatch(batch []byte, h BatchHeader, m *offsetMap, txn *txnTracker, st *CleanStats) (out []byte, same bool, horizon int64, err error) {
	hasHorizon := h.Attributes&attrDeleteHorizon != 0
	var canDiscard, discardRecords bool
	if h.IsControl() {
		// A marker goes once no batch of its transaction is left and its
		// delete horizon passed.
		canDiscard = txn.onControl(h, batch)
		discardRecords = canDiscard && hasHorizon && h.BaseTimestamp <= p.nowMs
	} else {
		canDiscard = txn.onData(h) // aborted data
		discardRecords = canDiscard
	}
	retainEmpty := h.HasProducerID() && p.lastOfProducer(h)
	markerForEmptyTxn := canDiscard && h.IsControl()

	all := int(h.NumRecords)
	keep := p.keep[:0] // by record index
	defer func() { p.keep = keep[:0] }()
	var body []byte // the records, decompressed once for both walks
	nkept := 0
	tombstones := false
	// A data batch the map took whole is decided by its bitmaps
	// (clean_bits.go): no key hashed or looked up again. The clean part,
	// markers and batches the map stopped in ask the map.
	bitsDecide := !h.IsControl() && !p.mapOnly && m.bits.covers(h)
	var drop, slow int
	if !discardRecords && bitsDecide {
		drop, slow = m.bits.count(m.bits.drop, h.BaseOffset, h.LastOffset()), m.bits.count(m.bits.slow, h.BaseOffset, h.LastOffset())
	}
	switch {
	case discardRecords:
	case bitsDecide && slow == 0 && (drop == 0 || drop == all):
		// Mapped whole, no tombstone: kept whole or dropped whole, as
		// its bits say, without decoding it.
		nkept = all - drop
	default:
		var err error
		if body, err = p.recordsOf(batch, h); err != nil {
			return nil, false, 0, err
		}
		if p.recs, err = keysOf(p.recs, body, h); err != nil {
			return nil, false, 0, err
		}
		all = len(p.recs)
		if bitsDecide {
			keep, nkept, tombstones = p.keepByBits(m.bits, hasHorizon, h.BaseTimestamp, keep)
			break
		}
		for g := 0; g < all; g += mapPrefetch {
			group := p.recs[g:min(g+mapPrefetch, all)]
			if !h.IsControl() {
				m.prefetch(group, m.latest)
			}
			for _, r := range group {
				k := h.IsControl() || p.retainRecord(r, m, hasHorizon, h.BaseTimestamp, st)
				keep = append(keep, k)
				if k {
					nkept++
					tombstones = tombstones || (r.tombstone && !h.IsControl())
				}
			}
		}
	}
	st.RecordsRead += int64(all)
	st.RecordsRemoved += int64(all - nkept)
	needHorizon := (tombstones || markerForEmptyTxn) && !hasHorizon
	if nkept == all && !needHorizon && (all > 0 || retainEmpty) {
		if hasHorizon {
			horizon = h.BaseTimestamp
		}
		return batch, true, horizon, nil // written at once: no copy
	}
	switch {
	case nkept > 0:
		// A batch rebuilt keeps its codec (Apache's filterTo), unless its
		// records (body, decoded above) did not shrink under it: then
		// they are written as they are, no larger on disk, and the pass
		// spends nothing compressing what does not compress (random or
		// already compressed values).
		codec := h.Compression()
		if len(batch)-BatchHeaderSize >= len(body) {
			codec = 0
		}
		if !needHorizon {
			// The base timestamp stays: the kept records' bytes are
			// copied as they are.
			if hasHorizon {
				horizon = h.BaseTimestamp
			}
			out, err := p.copyKept(h, keep, codec)
			return out, false, horizon, err
		}
		// Stamping a delete horizon moves the base timestamp the
		// records' deltas count from: decode and re-encode them.
		horizon = p.nowMs + p.deleteRetentionMs
		var kept []kmsg.Record
		i := 0
		if err := eachRecordIn(body, func(r kmsg.Record) {
			if i < len(keep) && keep[i] {
				kept = append(kept, r)
			}
			i++
		}); err != nil {
			return nil, false, 0, fmt.Errorf("%w: batch at offset %d: %v", ErrCleanCorrupt, h.BaseOffset, err)
		}
		out, err := p.rebuildBatch(h, kept, horizon, codec)
		return out, false, horizon, err
	case retainEmpty:
		return emptyBatch(h), false, 0, nil
	}
	return nil, false, 0, nil
}

// retainRecord is Apache's shouldRetainRecord: records past the map's
// reach stay; a keyless one goes (it cannot be compacted: invalid); a
// record stays if it is its key's latest and is not a tombstone past its
// batch's delete horizon.
func (p *CleanPlan) retainRecord(r keyRec, m *offsetMap, hasHorizon bool, horizon int64, st *CleanStats) bool {
	if r.off > m.latest {
		return true
	}
	if r.key == nil {
		st.KeylessSkipped++
		return false
	}
	latest := m.isLatestHashed(r.key, r.hash, r.off)
	retainDeletes := !hasHorizon || p.nowMs < horizon
	return latest && (!r.tombstone || retainDeletes)
}

// keepByBits decides a mapped batch's records (p.recs) by the map's
// bitmaps, as retainRecord would by the map: a record stays unless its
// drop bit is set (a later record of its key was mapped, or it has no
// key) or it is a tombstone past its batch's delete horizon.
func (p *CleanPlan) keepByBits(b *dirtyBits, hasHorizon bool, horizon int64, keep []bool) (_ []bool, nkept int, tombstones bool) {
	retainDeletes := !hasHorizon || p.nowMs < horizon
	for _, r := range p.recs {
		k := !b.dropped(r.off) && (!r.tombstone || retainDeletes)
		keep = append(keep, k)
		if k {
			nkept++
			tombstones = tombstones || r.tombstone
		}
	}
	return keep, nkept, tombstones
}

// lastOfProducer says whether the batch holds its producer's last
// sequence (or, for a producer whose last entry is a marker, is that
// marker): kept, emptied if need be, so producer state survives.
func (p *CleanPlan) lastOfProducer(h BatchHeader) bool {
	last, ok := p.producers[h.ProducerID]
	if !ok {
		return false
	}
	if last.LastDataOffset >= 0 {
		return h.LastOffset() == last.LastDataOffset
	}
	return h.IsControl() && h.ProducerEpoch == last.Epoch
}

// rebuildBatch writes the kept records of a batch as a new batch at the
// same offsets, compressed with codec (0: none), keeping its producer id,
// epoch, base sequence, last offset delta, leader epoch and
// transactional, control and timestamp-type attributes (Apache's
// buildRetainedRecordsInto). horizon > 0 stamps a delete horizon: it
// becomes the base timestamp the records' timestamp deltas count from,
// so their timestamps are kept.
func (p *CleanPlan) rebuildBatch(h BatchHeader, recs []kmsg.Record, horizon int64, codec int8) ([]byte, error) {
	attrs := h.Attributes &^ (AttrCompressionMask | attrDeleteHorizon)
	base := h.BaseTimestamp
	newBase := base
	if horizon > 0 {
		attrs |= attrDeleteHorizon
		newBase = horizon
	}
	maxTS := int64(-1)
	records := p.kept[:0]
	for _, r := range recs {
		ts := base + r.TimestampDelta64
		maxTS = max(maxTS, ts)
		r.TimestampDelta64 = ts - newBase
		r.Length = 0
		r.Length = int32(len(r.AppendTo(nil)) - kbin.VarintLen(0))
		records = r.AppendTo(records)
	}
	p.kept = records[:0]
	if h.Attributes&AttrLogAppendTime != 0 {
		maxTS = h.MaxTimestamp
	}
	return p.packBatch(h, attrs|int16(codec), newBase, maxTS, int32(len(recs)), records)
}

// copyKept is rebuildBatch for a batch whose base timestamp stays (no
// new delete horizon): the kept records' bytes (p.recs, keep) copied
// whole, their deltas unchanged, into a batch with the same header
// fields, compressed with codec (0: none), built in p.out (valid until
// the next call). Uncompressed, it is the header first, then the
// records, then its CRC: one copy of each byte.
func (p *CleanPlan) copyKept(h BatchHeader, keep []bool, codec int8) ([]byte, error) {
	n := 0
	maxTS := int64(-1)
	kept := int32(0)
	for i, r := range p.recs {
		if keep[i] {
			n += len(r.raw)
			maxTS = max(maxTS, h.BaseTimestamp+r.tsDelta)
			kept++
		}
	}
	if h.Attributes&AttrLogAppendTime != 0 {
		maxTS = h.MaxTimestamp
	}
	attrs := h.Attributes &^ AttrCompressionMask
	if codec != 0 {
		records := slices.Grow(p.kept[:0], n)
		for i, r := range p.recs {
			if keep[i] {
				records = append(records, r.raw...)
			}
		}
		p.kept = records[:0]
		return p.packBatch(h, attrs|int16(codec), h.BaseTimestamp, maxTS, kept, records)
	}
	out := appendBatchHeader(slices.Grow(p.out[:0], BatchHeaderSize+n), h, attrs, h.BaseTimestamp, maxTS, kept, n)
	for i, r := range p.recs {
		if keep[i] {
			out = append(out, r.raw...)
		}
	}
	setBatchCRC(out)
	p.out = out[:0]
	return out, nil
}

// packBatch builds a batch of n records in p.out (valid until the next
// call) with h's offsets and producer fields, attrs, and the records
// compressed with the codec attrs name (none: copied as they are).
func (p *CleanPlan) packBatch(h BatchHeader, attrs int16, firstTS, maxTS int64, n int32, records []byte) (out []byte, err error) {
	out = appendBatchHeader(p.out[:0], h, attrs, firstTS, maxTS, n, 0)
	if codec := int8(attrs & AttrCompressionMask); codec == 0 {
		out = append(out, records...)
	} else if out, err = compressInto(out, codec, records); err != nil {
		return nil, fmt.Errorf("compressing the batch at offset %d: %w", h.BaseOffset, err)
	}
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-logOverhead))
	setBatchCRC(out)
	p.out = out[:0]
	return out, nil
}

// emptyBatch is a batch with no records that keeps a producer's last
// sequence and epoch (Apache's writeEmptyHeader).
func emptyBatch(h BatchHeader) []byte {
	attrs := h.Attributes &^ (AttrCompressionMask | attrDeleteHorizon)
	return encodeBatch(h, attrs, h.MaxTimestamp, h.MaxTimestamp, 0, nil)
}

func encodeBatch(h BatchHeader, attrs int16, firstTS, maxTS int64, n int32, records []byte) []byte {
	out := append(appendBatchHeader(make([]byte, 0, BatchHeaderSize+len(records)), h, attrs, firstTS, maxTS, n, len(records)), records...)
	setBatchCRC(out)
	return out
}

// appendBatchHeader appends the header of a batch of n records taking
// recordBytes, with h's offsets and producer fields; its CRC is set once
// the records follow (setBatchCRC).
func appendBatchHeader(dst []byte, h BatchHeader, attrs int16, firstTS, maxTS int64, n int32, recordBytes int) []byte {
	b := kmsg.RecordBatch{
		FirstOffset:          h.BaseOffset,
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      h.LastOffsetDelta,
		FirstTimestamp:       firstTS,
		MaxTimestamp:         maxTS,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		FirstSequence:        h.BaseSequence,
		NumRecords:           n,
	}
	b.Length = int32(BatchHeaderSize - logOverhead + recordBytes)
	return b.AppendTo(dst)
}

// offsetMap is the pass's key→latest-offset map, bounded by bytes like
// Apache's SkimpyOffsetMap, but keeping the keys themselves (so no two
// keys can ever be taken for one): an open-addressing table of fixed
// slots, allocated once at the size the pass can need, and the keys'
// bytes in chunks beside it. Its budget is what it allocates, so a pass's
// memory is log.cleaner.dedupe.buffer.size over the threads, not an
// estimate (a Go map took over twice its estimate, growth included).
//
// A lookup scans tags, one byte a slot (8 bits of the key's hash that do
// not choose its place), before it reads a slot: the tags are 1/25th of
// the table and stay in the CPU's caches where the slots (tens of MiB,
// read at random) do not. A key that is not mapped (every record of a
// log's clean part, in a pass over a partition the map cannot hold at
// once) then costs a probe of a dozen tag bytes instead of a dozen slots
// read from memory: those lookups were most of such a pass's time.
type offsetMap struct {
	tags   []uint8 // 0: an empty slot
	slots  []mapSlot
	mem    []byte   // tags and slots (mapMemory), nil if on the Go heap
	chunks [][]byte // the keys' bytes
	budget int64
	used   int64 // bytes allocated: slots and chunks
	n      int   // keys mapped
	seed   maphash.Seed
	base   int64 // the first offset mapped: slots hold offsets from it
	latest int64 // the last offset mapped: later records are kept as they are
	sink   uint64
	// bits, if set, mark the dirty records a later one of their key
	// replaced (clean_bits.go): the copy of the dirty part asks them.
	bits *dirtyBits
}

// mapSlot is one key (empty where its tag is 0). Its offset is held as a
// 32-bit delta from the first offset mapped (a pass maps offsets in
// rising order): 24 bytes a slot instead of 32 is a third more keys in
// the same budget, and fewer passes for a partition that does not fit.
type mapSlot struct {
	hash               uint64
	rel, chunk, at, kl uint32
}

const (
	mapSlotBytes = 24 + 1 // the slot and its tag
	mapMaxLoad   = 0.8
	mapChunk     = 64 << 10
	// mapEntryOverhead is the budget an entry takes beside its key's
	// bytes when the map is sized by its budget: half the budget goes to
	// slots, filled to mapMaxLoad.
	mapEntryOverhead = 63 // 2 × mapSlotBytes / mapMaxLoad, rounded up
)

// newOffsetMap makes a map of at most budget bytes for at most maxKeys
// keys (the pass's dirty offsets: no more keys can be met).
func newOffsetMap(budget, maxKeys int64) *offsetMap {
	n := min(budget/(2*mapSlotBytes), int64(float64(max(maxKeys, 1))/mapMaxLoad)+1)
	n = max(n, 1)
	m := &offsetMap{budget: budget, used: n * mapSlotBytes, seed: maphash.MakeSeed()}
	m.tags, m.slots, m.mem = allocTables(int(n))
	return m
}

// allocTables makes n tags and slots, apart from the Go heap (mapMemory)
// when they are big enough to be worth a mapping of their own; mem is
// that mapping (nil: on the heap).
func allocTables(n int) (tags []uint8, slots []mapSlot, mem []byte) {
	tagBytes := (n + 63) &^ 63 // the slots start on a cache line
	size := tagBytes + n*int(unsafe.Sizeof(mapSlot{}))
	if size < mapMemoryMin {
		return make([]uint8, n), make([]mapSlot, n), nil
	}
	mem, err := mapMemory(size)
	if err != nil {
		return make([]uint8, n), make([]mapSlot, n), nil
	}
	return mem[:n:n], unsafe.Slice((*mapSlot)(unsafe.Pointer(&mem[tagBytes])), n), mem
}

// mapMemoryMin is the least size of tables worth a mapping of their
// own: a huge page.
const mapMemoryMin = 2 << 20

// release gives the tables' mapping back (the map is unusable after).
func (m *offsetMap) release() {
	if m.mem != nil {
		freeMapMemory(m.mem)
	}
	m.tags, m.slots, m.mem = nil, nil, nil
}

func (m *offsetMap) hash(key []byte) uint64 { return maphash.Bytes(m.seed, key) }

// home is where a key's probe starts: the hash's high bits.
func (m *offsetMap) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(m.slots)))
	return int(hi)
}

// tagOf is the key's tag: its hash's low byte (the high bits choose its
// home, so neighbours share them), never 0.
func tagOf(h uint64) uint8 {
	if t := uint8(h); t != 0 {
		return t
	}
	return 1
}

// find is key's slot, or the empty slot where it would go.
func (m *offsetMap) find(key []byte, h uint64) int {
	tag := tagOf(h)
	for i := m.home(h); ; {
		t := m.tags[i]
		if t == 0 {
			return i
		}
		if t == tag {
			if sl := &m.slots[i]; sl.hash == h && string(m.chunks[sl.chunk][sl.at:sl.at+sl.kl]) == string(key) {
				return i
			}
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// put maps key to off; false (nothing stored) when a new key would go
// over the budget, unless force.
// Offsets must come in rising order (the map's base is the first); one
// more than 2^32-1 past the first is refused even if forced (a pass's
// first batch spans fewer).
func (m *offsetMap) put(key []byte, off int64, force bool) bool {
	return m.putHashed(key, m.hash(key), off, force)
}

// putHashed is put with the key's hash already computed (prefetch).
func (m *offsetMap) putHashed(key []byte, h uint64, off int64, force bool) bool {
	if m.n == 0 {
		m.base = off
	}
	if off < m.base || off-m.base > math.MaxUint32 {
		return false
	}
	rel := uint32(off - m.base)
	i := m.find(key, h)
	if m.tags[i] != 0 {
		if sl := &m.slots[i]; rel > sl.rel {
			if m.bits != nil {
				m.bits.markDrop(m.base + int64(sl.rel))
			}
			sl.rel = rel
		}
		return true
	}
	full := float64(m.n+1) > mapMaxLoad*float64(len(m.slots))
	room := m.room()
	if !force && (full || int64(len(key)) > room) {
		return false
	}
	if full {
		m.grow()
		i = m.find(key, h)
	}
	c := len(m.chunks) - 1
	if c < 0 || cap(m.chunks[c])-len(m.chunks[c]) < len(key) {
		size := max(mapChunk, len(key))
		if !force {
			size = int(min(int64(size), max(room, int64(len(key)))))
		}
		m.chunks = append(m.chunks, make([]byte, 0, size))
		m.used += int64(size)
		c++
	}
	at := len(m.chunks[c])
	m.chunks[c] = append(m.chunks[c], key...)
	m.slots[i] = mapSlot{hash: h, rel: rel, chunk: uint32(c), at: uint32(at), kl: uint32(len(key))}
	m.tags[i] = tagOf(h)
	m.n++
	return true
}

// filled is what the map's entries take of the budget, as it is sized:
// mapEntryOverhead each beside their keys' bytes (a map its budget
// cannot add to reads about its budget).
func (m *offsetMap) filled() int64 {
	n := int64(m.n) * mapEntryOverhead
	for _, c := range m.chunks {
		n += int64(len(c))
	}
	return min(n, m.budget)
}

// room is what the budget has left: unallocated, and the last chunk's
// free bytes.
func (m *offsetMap) room() int64 {
	room := m.budget - m.used
	if c := len(m.chunks); c > 0 {
		room += int64(cap(m.chunks[c-1]) - len(m.chunks[c-1]))
	}
	return room
}

// grow doubles the slots: only for a forced put (the first batch of a
// pass is always mapped whole).
func (m *offsetMap) grow() {
	old, oldTags, oldMem := m.slots, m.tags, m.mem
	m.tags, m.slots, m.mem = allocTables(2 * len(old))
	m.used += int64(len(old)) * mapSlotBytes
	for i, sl := range old {
		if oldTags[i] == 0 {
			continue
		}
		key := m.chunks[sl.chunk][sl.at : sl.at+sl.kl]
		j := m.find(key, sl.hash)
		m.slots[j], m.tags[j] = sl, oldTags[i]
	}
	if oldMem != nil {
		freeMapMemory(oldMem)
	}
}

func (m *offsetMap) get(key []byte) (int64, bool) {
	i := m.find(key, m.hash(key))
	return m.base + int64(m.slots[i].rel), m.tags[i] != 0
}

// isLatest says whether the record at off is its key's latest (or its
// key is not mapped). It compares keys' bytes only when it must: a slot
// of the same hash holding off itself is that record's key (one record
// an offset), so a retained record costs one memory access, not two.
func (m *offsetMap) isLatest(key []byte, off int64) bool {
	return m.isLatestHashed(key, m.hash(key), off)
}

// isLatestHashed is isLatest with the key's hash already computed.
func (m *offsetMap) isLatestHashed(key []byte, h uint64, off int64) bool {
	tag := tagOf(h)
	for i := m.home(h); ; {
		t := m.tags[i]
		if t == 0 {
			return true
		}
		if sl := &m.slots[i]; t == tag && sl.hash == h {
			at := m.base + int64(sl.rel)
			if at == off {
				return true
			}
			if string(m.chunks[sl.chunk][sl.at:sl.at+sl.kl]) == string(key) {
				return off >= at
			}
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

func (m *offsetMap) len() int { return m.n }

// keyRec is one record as the map and the filter see it; hash is set by
// prefetch.
type keyRec struct {
	off       int64
	key       []byte // nil: no key
	hash      uint64
	tombstone bool
	tsDelta   int64
	raw       []byte // the record's bytes, its length first
}

// keysOf collects a batch's records into recs (reused), reading only
// what the cleaner decides on (offset, key, whether the value is null,
// timestamp delta) and where each record's bytes are, without decoding
// them whole: the map and the filter look at every record of every
// batch. body is the batch's records, decompressed (recordsOf).
func keysOf(recs []keyRec, body []byte, h BatchHeader) ([]keyRec, error) {
	recs = recs[:0]
	bad := func(why string) error {
		return fmt.Errorf("%w: batch at offset %d: %s", ErrCleanCorrupt, h.BaseOffset, why)
	}
	for len(body) > 0 {
		size, n := kbin.Varint(body)
		if n == 0 || size < 0 || int(size) > len(body)-n {
			return recs, bad("record length out of range")
		}
		raw := body[:n+int(size)]
		rec := body[n : n+int(size)]
		body = body[n+int(size):]
		if len(rec) < 1 {
			return recs, bad("empty record")
		}
		rec = rec[1:] // attributes
		tsDelta, n := kbin.Varlong(rec)
		if n == 0 {
			return recs, bad("timestamp delta")
		}
		rec = rec[n:]
		offDelta, n := kbin.Varint(rec)
		if n == 0 {
			return recs, bad("offset delta")
		}
		rec = rec[n:]
		kl, n := kbin.Varint(rec)
		if n == 0 || kl < -1 || int(kl) > len(rec)-n {
			return recs, bad("key length")
		}
		var key []byte
		if kl >= 0 {
			key = rec[n : n+int(kl)]
		}
		rec = rec[n+max(int(kl), 0):]
		vl, n := kbin.Varint(rec)
		if n == 0 || vl < -1 {
			return recs, bad("value length")
		}
		recs = append(recs, keyRec{off: h.BaseOffset + int64(offDelta), key: key, tombstone: vl == -1, tsDelta: tsDelta, raw: raw})
	}
	return recs, nil
}

// mapPrefetch is how many records' lookups are started at once.
const mapPrefetch = 32

// prefetch hashes the keyed records at or below latest and loads what
// their probes will read, before any probe: the tag and the slot where
// each one's probe starts, then the key bytes of a slot its probe will
// compare. The loads of each step do not wait on one another, and each
// step's loop does little else, so the CPU keeps dozens of cache misses
// in flight instead of one a record, and the probes that follow find
// their lines in the cache. A pass over a map larger than the caches
// waits on memory for almost all its time otherwise. (One loop doing
// the hashing and the loads together held too many instructions between
// two loads for more than a few of them to be in flight at once.)
func (m *offsetMap) prefetch(recs []keyRec, latest int64) {
	for i := range recs {
		if r := &recs[i]; r.key != nil && r.off <= latest {
			r.hash = m.hash(r.key)
		}
	}
	var sink uint64
	for i := range recs {
		if r := &recs[i]; r.key != nil && r.off <= latest {
			j := m.home(r.hash)
			sink += uint64(m.tags[j]) + m.slots[j].hash
		}
	}
	// The keys a probe compares: that of the first slot of the same hash,
	// unless it holds the record's own offset (isLatestHashed needs no
	// compare then).
	for i := range recs {
		r := &recs[i]
		if r.key == nil || r.off > latest {
			continue
		}
		tag := tagOf(r.hash)
		for j := m.home(r.hash); ; {
			t := m.tags[j]
			if t == 0 {
				break
			}
			if sl := &m.slots[j]; t == tag && sl.hash == r.hash {
				if m.base+int64(sl.rel) != r.off {
					sink += uint64(m.chunks[sl.chunk][sl.at])
				}
				break
			}
			if j++; j == len(m.slots) {
				j = 0
			}
		}
	}
	m.sink += sink // kept, so the loads are not optimised away
}

// txnTracker follows transactions through a pass (Apache's
// CleanedTransactionMetadata): which data batches are aborted, which
// markers may go (none of their transaction's batches met), and which
// aborted transactions the new .txnindex keeps (their marker stays and
// batches of them were met).
type txnTracker struct {
	pending   []AbortedTxn // by first offset
	aborted   map[int64]*abortedSeen
	committed map[int64]bool
	indexed   []AbortedTxn
}

type abortedSeen struct {
	txn      AbortedTxn
	observed bool
}

func newTxnTracker(aborted []AbortedTxn) *txnTracker {
	pending := append([]AbortedTxn(nil), aborted...)
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].FirstOffset < pending[j].FirstOffset })
	return &txnTracker{pending: pending, aborted: map[int64]*abortedSeen{}, committed: map[int64]bool{}}
}

// consumeUpTo takes in the aborted transactions begun by the end of the
// batch h, except those whose marker lies before it: a walk that starts
// past their markers (buildMap's, at the first dirty segment) would
// otherwise take their producer's later transactions for aborted ones
// (Apache collects the aborted transactions overlapping the range it
// walks).
func (t *txnTracker) consumeUpTo(h BatchHeader) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= h.LastOffset() {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if a.LastOffset >= h.BaseOffset {
			t.aborted[a.ProducerID] = &abortedSeen{txn: a}
		}
	}
}

// onData reports whether a data batch belongs to an aborted transaction.
func (t *txnTracker) onData(h BatchHeader) bool {
	t.consumeUpTo(h)
	if !h.IsTransactional() {
		return false
	}
	if a := t.aborted[h.ProducerID]; a != nil {
		a.observed = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onControl reports whether a marker may be discarded (none of its
// transaction's batches were met in this pass).
func (t *txnTracker) onControl(h BatchHeader, batch []byte) bool {
	t.consumeUpTo(h)
	commit, _, err := ParseMarker(batch)
	if err != nil {
		return false
	}
	if !commit {
		a := t.aborted[h.ProducerID]
		delete(t.aborted, h.ProducerID)
		if a != nil && a.observed {
			t.indexed = append(t.indexed, a.txn)
			return false
		}
		return true
	}
	if t.committed[h.ProducerID] {
		delete(t.committed, h.ProducerID)
		return false
	}
	return true
}

// takeIndexed returns the aborted transactions to index whose marker lies
// in [from, to).
func (t *txnTracker) takeIndexed(from, to int64) []AbortedTxn {
	var out, rest []AbortedTxn
	for _, a := range t.indexed {
		if a.LastOffset >= from && a.LastOffset < to {
			out = append(out, a)
		} else {
			rest = append(rest, a)
		}
	}
	t.indexed = rest
	return out
}

// recordsOf is a batch's records body, decompressed into the pass's
// scratch buffer (valid until the next call): the pass decompresses every
// batch it maps and every batch it copies, and a fresh buffer each time
// was most of its CPU.
func (p *CleanPlan) recordsOf(batch []byte, h BatchHeader) ([]byte, error) {
	body := batch[BatchHeaderSize:]
	c := h.Compression()
	if c == 0 {
		return body, nil
	}
	out, err := decompressInto(p.scratch[:0], c, body, readLimit)
	if err != nil {
		return nil, fmt.Errorf("%w: batch at offset %d: %v", ErrCleanCorrupt, h.BaseOffset, err)
	}
	p.scratch = out[:0]
	return out, nil
}
