package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
)

// View is an immutable snapshot of a log for readers. Fetch and ListOffsets
// read segment bytes through it directly, so they never queue behind the
// partition actor's appends.
type View struct {
	LogStart      int64
	HighWatermark int64
	LastStable    int64
	Size          int64
	segs          []segView
	// changed is made by the first Changed (most views are never waited
	// on: a channel is 96 bytes for each idle partition and each
	// publish) and closed, or replaced by closedChan, when a newer view
	// is published.
	changed atomic.Pointer[chan struct{}]

	// EndOffset is the log end offset when the view was published
	// (written, not necessarily durable yet); for metrics and inspection.
	EndOffset int64
	// Offline is the disk error that took the log offline, or nil: reads
	// then answer KAFKA_STORAGE_ERROR, as Apache does for a partition on
	// a failed log directory.
	Offline error
	// Epochs is the leader-epoch cache (never changed once published),
	// and LeaderEpoch the epoch this broker leads the partition at.
	Epochs      Epochs
	LeaderEpoch int32
}

type segView struct {
	base         int64
	file         *segFile
	size         int64 // readable bytes
	index        []indexEntry
	times        []timeEntry
	maxTimestamp int64
	aborted      []AbortedTxn
	// recent is a copy of the active segment's recent batches as
	// published (nil for older segments and before the first append);
	// see segment.recent.
	recent *recentRefs
}

// recentBatches is how many of the last appended batches a view of the
// active segment remembers.
const recentBatches = 4

// recentRefs are a segment's last appended batches, newest first.
type recentRefs [recentBatches]batchRef

// SegmentCount is the number of segments in the view.
func (v *View) SegmentCount() int { return len(v.segs) }

// Changed is closed when a newer view is published; long-poll fetches wait
// on it instead of polling.
func (v *View) Changed() <-chan struct{} {
	for {
		if c := v.changed.Load(); c != nil {
			return *c
		}
		c := make(chan struct{})
		if v.changed.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// superseded closes what Changed returned and makes later calls return a
// closed channel: a newer view is published.
func (v *View) superseded() {
	if c := v.changed.Swap(&closedChan); c != nil && c != &closedChan {
		close(*c)
	}
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// segmentFor returns the index of the last segment whose base is <= offset.
func (v *View) segmentFor(offset int64) int {
	i := sort.Search(len(v.segs), func(i int) bool { return v.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	return i
}

// lookup returns the position of the last indexed batch at or before offset.
func (s *segView) lookup(offset int64) int64 {
	rel := offset - s.base
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].rel) > rel }) - 1
	if i < 0 {
		return 0
	}
	return int64(s.index[i].pos)
}

// headerPrefix is enough of a header to walk batches: offset, length,
// magic and last offset delta.
const headerPrefix = 27

type batchRef struct {
	pos, size      int64
	base, lastOffs int64
}

// remembered are the batches the view remembers, none if it has no copy.
func (s *segView) remembered() []batchRef {
	if s.recent == nil {
		return nil
	}
	return s.recent[:]
}

func (s *segView) headerAt(pos int64, buf []byte) (batchRef, bool, error) {
	if pos+headerPrefix > s.size {
		return batchRef{}, false, nil
	}
	if _, err := s.file.ReadAt(buf[:headerPrefix], pos); err != nil {
		return batchRef{}, false, fmt.Errorf("reading batch header at %d of segment %d: %w", pos, s.base, err)
	}
	base := int64(binary.BigEndian.Uint64(buf[0:]))
	size := int64(int32(binary.BigEndian.Uint32(buf[8:]))) + logOverhead
	last := base + int64(int32(binary.BigEndian.Uint32(buf[23:])))
	if pos+size > s.size {
		return batchRef{}, false, nil
	}
	return batchRef{pos: pos, size: size, base: base, lastOffs: last}, true, nil
}

// find returns the batch that contains offset, or ok=false at the end of
// the readable data.
func (v *View) find(offset int64) (seg int, ref batchRef, ok bool, err error) {
	var hdr [headerPrefix]byte
	for i := v.segmentFor(offset); i < len(v.segs); i++ {
		s := &v.segs[i]
		for _, r := range s.remembered() {
			if r.size > 0 && r.base <= offset && offset <= r.lastOffs && r.pos+r.size <= s.size {
				return i, r, true, nil
			}
		}
		pos := s.lookup(offset)
		for {
			ref, ok, err := s.headerAt(pos, hdr[:])
			if err != nil || !ok {
				if err != nil {
					return 0, batchRef{}, false, err
				}
				break
			}
			if ref.lastOffs >= offset {
				return i, ref, true, nil
			}
			pos += ref.size
		}
	}
	return 0, batchRef{}, false, nil
}

// Read returns whole batches starting with the one that contains offset, no
// batch at or beyond upTo, at most maxBytes unless the first batch alone is
// larger (then that batch, so a consumer can always make progress, KIP-74).
// It reads from one segment, in chunks: the answer's buffer grows as whole
// batches fit, so a fetch that asks for much but finds little allocates
// little. An offset outside [log start, high watermark] is
// ErrOffsetOutOfRange; an offset at or past upTo reads nothing.
func (v *View) Read(offset int64, maxBytes int32, upTo int64) ([]byte, error) {
	data, _, err := v.read(offset, maxBytes, upTo, false)
	return data, err
}

// ReadPooled is Read into a pooled buffer: the caller releases it (nil
// when nothing was read) once nothing refers to the bytes returned.
func (v *View) ReadPooled(offset int64, maxBytes int32, upTo int64) ([]byte, *Buf, error) {
	return v.read(offset, maxBytes, upTo, true)
}

func (v *View) read(offset int64, maxBytes int32, upTo int64, pooled bool) ([]byte, *Buf, error) {
	if offset < v.LogStart || offset > v.HighWatermark {
		return nil, nil, ErrOffsetOutOfRange
	}
	if upTo > v.HighWatermark {
		upTo = v.HighWatermark
	}
	if offset >= upTo {
		return nil, nil, nil
	}
	si, first, ok, err := v.find(offset)
	if err != nil || !ok || first.base >= upTo {
		return nil, nil, err
	}
	s := &v.segs[si]
	limit := min(max(int64(maxBytes), first.size), s.size-first.pos)
	r := chunkReader{s: s, pos: first.pos, limit: limit, pooled: pooled}
	kept := int64(0) // bytes of whole batches taken
	for {
		if !r.have(kept + headerPrefix) {
			break
		}
		base := int64(binary.BigEndian.Uint64(r.buf[kept:]))
		size := int64(int32(binary.BigEndian.Uint32(r.buf[kept+8:]))) + logOverhead
		if base >= upTo || size < headerPrefix || kept+size > limit || !r.have(kept+size) {
			break
		}
		kept += size
	}
	if r.err != nil && kept < first.size {
		r.pb.Release()
		return nil, nil, fmt.Errorf("reading segment %d at %d: %w", s.base, first.pos, r.err)
	}
	if kept == 0 {
		r.pb.Release()
		return nil, nil, nil
	}
	return r.buf[:kept:kept], r.pb, nil
}

// readChunk is the most Read reads from a segment at once.
const readChunk = 1 << 20

// chunkReader reads a segment from pos into a growing buffer, never past
// limit bytes.
type chunkReader struct {
	s     *segView
	pos   int64
	limit int64
	buf   []byte
	err   error

	pooled bool // buf comes from getBuf, held by pb
	pb     *Buf
}

// have reads until the buffer holds n bytes; false when it cannot (the
// limit, the end of the segment or a read error).
func (r *chunkReader) have(n int64) bool {
	for int64(len(r.buf)) < n {
		if r.err != nil || n > r.limit {
			return false
		}
		want := min(max(n, int64(len(r.buf))+readChunk), r.limit)
		if int64(cap(r.buf)) < want {
			size := min(max(want, 2*int64(cap(r.buf))), r.limit)
			if r.pooled {
				// The old buffer is nobody's yet: back to the pool at once.
				pb := getBuf(int(size))
				bigger := append(pb.Bytes(), r.buf...)
				r.pb.Release()
				r.pb, r.buf = pb, bigger
			} else {
				bigger := make([]byte, len(r.buf), size)
				copy(bigger, r.buf)
				r.buf = bigger
			}
		}
		got, err := r.s.file.ReadAt(r.buf[len(r.buf):want], r.pos+int64(len(r.buf)))
		r.buf = r.buf[:len(r.buf)+got]
		if err != nil {
			r.err = err
		}
		if got == 0 && err == nil {
			r.err = io.ErrUnexpectedEOF
		}
	}
	return true
}

// AbortedTxns lists aborted transactions that a read_committed fetch
// returning [fetchOffset, upper) must be told about (spec R-RC-3), in
// marker order.
func (v *View) AbortedTxns(fetchOffset, upper int64) []AbortedTxn {
	var out []AbortedTxn
	for i := v.segmentFor(fetchOffset); i < len(v.segs); i++ {
		for _, a := range v.segs[i].aborted {
			if a.LastOffset >= fetchOffset && a.FirstOffset < upper {
				out = append(out, a)
			}
		}
	}
	return out
}

// ForEachBatch calls fn with each whole batch from the one containing
// offset up to (not including) upTo, until fn returns false.
func (v *View) ForEachBatch(offset, upTo int64, fn func(batch []byte) bool) error {
	si, ref, ok, err := v.find(offset)
	if err != nil || !ok {
		return err
	}
	var hdr [headerPrefix]byte
	pos := ref.pos
	for ; si < len(v.segs); si, pos = si+1, 0 {
		s := &v.segs[si]
		for {
			ref, ok, err := s.headerAt(pos, hdr[:])
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if ref.base >= upTo {
				return nil
			}
			batch := make([]byte, ref.size)
			if _, err := s.file.ReadAt(batch, pos); err != nil {
				return fmt.Errorf("reading segment %d at %d: %w", s.base, pos, err)
			}
			if !fn(batch) {
				return nil
			}
			pos += ref.size
		}
	}
	return nil
}

// OffsetForTimestamp finds the first record with timestamp >= ts below upTo
// (ListOffsets by timestamp). found is false when there is none.
func (v *View) OffsetForTimestamp(ts, upTo int64) (offset, timestamp int64, found bool, err error) {
	for _, s := range v.segs {
		if s.maxTimestamp < ts {
			continue
		}
		start := s.base
		if i := sort.Search(len(s.times), func(i int) bool { return s.times[i].ts >= ts }) - 1; i >= 0 {
			start = s.times[i].offset
		}
		if start < v.LogStart {
			start = v.LogStart
		}
		var recordErr error
		walkErr := v.ForEachBatch(start, upTo, func(batch []byte) bool {
			h, herr := ParseBatchHeader(batch)
			if herr != nil || h.MaxTimestamp < ts {
				return true
			}
			recordErr = forEachRecord(batch, func(o, t int64) bool {
				if t >= ts && o >= start {
					offset, timestamp, found = o, t, true
					return false
				}
				return true
			})
			return !found && recordErr == nil
		})
		// A batch that cannot be decoded is an error, not "no such
		// record" (the walk's own result must not hide it).
		if err := errors.Join(walkErr, recordErr); err != nil {
			return -1, -1, false, err
		}
		return offset, timestamp, found, nil
	}
	return -1, -1, false, nil
}

// MaxTimestamp finds the record with the largest timestamp in [LogStart,
// upTo) (ListOffsets -3, KIP-734); the first such record when several
// share it. A segment wholly inside the range answers from its max
// timestamp; one cut by the log start or by upTo (records not yet durable,
// or not yet stable) is scanned, and only when it could raise the maximum.
func (v *View) MaxTimestamp(upTo int64) (offset, timestamp int64, found bool, err error) {
	best := int64(-1)
	for i := range v.segs {
		s := &v.segs[i]
		if s.maxTimestamp <= best {
			continue
		}
		inside := s.base >= v.LogStart && i+1 < len(v.segs) && v.segs[i+1].base <= upTo
		if inside {
			best = s.maxTimestamp
			continue
		}
		from, to := max(s.base, v.LogStart), upTo
		if i+1 < len(v.segs) {
			to = min(to, v.segs[i+1].base)
		}
		if from >= to {
			continue
		}
		var recordErr error
		walkErr := v.ForEachBatch(from, to, func(batch []byte) bool {
			recordErr = forEachRecord(batch, func(o, t int64) bool {
				if o >= from && o < to && t > best {
					best = t
				}
				return o < to
			})
			return recordErr == nil
		})
		if err := errors.Join(walkErr, recordErr); err != nil {
			return -1, -1, false, err
		}
	}
	if best < 0 {
		return -1, -1, false, nil
	}
	return v.OffsetForTimestamp(best, upTo)
}

// SegmentStart is where one segment starts and the largest timestamp in
// it (-1 if none), for ListOffsets v0's list of offsets.
type SegmentStart struct {
	Base, MaxTimestamp int64
}

// SegmentStarts lists the segments' starts, oldest first.
func (v *View) SegmentStarts() []SegmentStart {
	out := make([]SegmentStart, len(v.segs))
	for i, s := range v.segs {
		out[i] = SegmentStart{Base: s.base, MaxTimestamp: s.maxTimestamp}
	}
	return out
}
