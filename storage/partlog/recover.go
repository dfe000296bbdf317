package partlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Recovery policy (docs/durability.md says the same):
//
//   - Every segment but the last is sealed: roll fsyncs it and writes its
//     indexes before the next segment exists. A sealed segment is trusted:
//     its indexes are loaded and only the batches after the last index
//     entry are read and CRC-checked (no start ever rescans whole sealed
//     segments).
//   - The last segment is trusted up to the recovery point (the
//     recovery-point file: a position the checkpoint saw fsynced, written
//     every minute and at shutdown) and scanned with CRC checks after it.
//     After a clean shutdown the recovery point is its end.
//   - A bad batch after the recovery point is a torn tail a crash left:
//     it and everything after it is cut, as it was never acknowledged.
//   - A bad batch where data is known durable (a sealed segment, or below
//     the recovery point), segments that overlap, or durable bytes that
//     are missing are corruption: nothing is cut or deleted; Open fails
//     naming the file and the byte offset, unless --skip-corrupt, which
//     moves the segment (with its indexes) to <data>/quarantine and goes
//     on without it. Offsets are never reused: the log continues after the
//     highest offset any intact batch of the quarantined segment held.

// recoveryPointFile holds the recovery point of the last segment.
const recoveryPointFile = "recovery-point"

const storeName = "partition log"

// recoveryPoint says that segment base is durable up to byte pos, where
// offset next starts, and that its first indexEntries offset-index and
// timeEntries time-index entries are durable too.
type recoveryPoint struct {
	base, pos, next           int64
	indexEntries, timeEntries int
}

func (r recoveryPoint) encode() []byte {
	line := fmt.Sprintf("%d %d %d %d %d", r.base, r.pos, r.next, r.indexEntries, r.timeEntries)
	return []byte(fmt.Sprintf("1\n%s %08x\n", line, crc32.Checksum([]byte(line), crc32c)))
}

func parseRecoveryPoint(b []byte) (recoveryPoint, error) {
	var r recoveryPoint
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "1" {
		return r, errors.New("not a version 1 recovery point")
	}
	f := strings.Fields(lines[1])
	if len(f) != 6 {
		return r, errors.New("wrong number of fields")
	}
	line := strings.Join(f[:5], " ")
	if want, err := strconv.ParseUint(f[5], 16, 32); err != nil || uint32(want) != crc32.Checksum([]byte(line), crc32c) {
		return r, errors.New("checksum mismatch")
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return r, fmt.Errorf("bad field %q", f[i])
		}
		n[i] = v
	}
	return recoveryPoint{base: n[0], pos: n[1], next: n[2], indexEntries: int(n[3]), timeEntries: int(n[4])}, nil
}

// Open opens (creating if needed) the log in dir and recovers it as the
// policy above says.
func Open(env durable.Env, dir string, cfg Config) (*Log, error) {
	env = env.Or()
	fsys := env.FS
	if err := durable.MkdirAll(fsys, dir); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, env: env}
	if err := finishSwaps(env, dir); err != nil {
		return nil, err
	}
	rp, hasRP := l.readRecoveryPoint()

	bases, err := segmentBases(fsys, dir)
	if err != nil {
		return nil, err
	}
	clean := l.cleanlyClosed(bases)
	// minNext is the lowest offset the log may continue at: offsets a
	// quarantined segment or the recovery point vouch for are never
	// handed out again.
	minNext := int64(0)
	if hasRP {
		minNext = rp.next
	}
	for i, base := range bases {
		last := i == len(bases)-1
		var segRP *recoveryPoint
		if last && !clean && hasRP && rp.base == base {
			segRP = &rp
		}
		seg, bad, err := l.openSegment(base, !last || clean, segRP)
		if err == nil && bad == nil {
			if n := len(l.segments); n > 0 && seg.base < l.segments[n-1].next {
				bad = &damage{offset: 0, reason: fmt.Sprintf("the segment starts at offset %d, inside the previous segment (which ends at %d)", seg.base, l.segments[n-1].next)}
				seg.close()
			}
		}
		if err != nil {
			l.closeAll()
			return nil, err
		}
		if bad != nil {
			if err := l.quarantineSegment(base, bad); err != nil {
				l.closeAll()
				return nil, err
			}
			minNext = max(minNext, bad.next)
			continue
		}
		if !last && !seg.indexesExact {
			// A sealed segment's indexes are written only when it rolls:
			// write the rebuilt ones now, or every start rebuilds them.
			if err := seg.writeIndexes(fsys); err != nil {
				l.env.Logger.Warn("could not write rebuilt indexes", "dir", dir, "segment", base, "err", err)
			}
		}
		if n := len(l.segments); n > 0 && seg.base > l.segments[n-1].next {
			// The cleaner leaves such gaps (the last records of a segment
			// removed); a quarantined segment too (logged as such).
			l.env.Logger.Debug("offsets missing between segments", "dir", dir,
				"from", l.segments[n-1].next, "to", seg.base)
		}
		l.segments = append(l.segments, seg)
	}
	start, hasStart := readLogStart(fsys, dir)
	if n := len(l.segments); n == 0 || l.segments[n-1].next < minNext {
		base := minNext
		if n == 0 && hasStart && start > base {
			base = start
		}
		if n > 0 || len(bases) > 0 {
			l.env.Logger.Warn("starting a new segment after the recovered log", "dir", dir, "base", base)
		}
		if n > 0 {
			// The recovered last segment becomes a sealed one: without
			// the room recovery kept (a trusted segment ends at its last
			// batch), fsynced before the next segment exists.
			prev := l.segments[n-1]
			err := prev.cutRoom()
			if err == nil {
				err = prev.log.Sync()
			}
			if err != nil {
				l.closeAll()
				return nil, err
			}
		}
		seg, err := createSegment(fsys, dir, base, time.Now())
		if err != nil {
			l.closeAll()
			return nil, err
		}
		l.segments = append(l.segments, seg)
		l.dirtyDir = true
	}
	l.logStart = l.segments[0].base
	if hasStart && start > l.logStart && start <= l.active().next {
		l.logStart = start
	}
	for _, s := range l.segments {
		s.visible = s.size
		keep := s.aborted[:0]
		for _, a := range s.aborted {
			if a.LastOffset < s.next {
				keep = append(keep, a)
			}
		}
		s.aborted = keep
	}
	l.hw = l.active().next
	l.loadCleanerOffset()
	if err := l.loadEpochs(l.scannedEpochs); err != nil {
		l.closeAll()
		return nil, err
	}
	l.scannedEpochs = nil
	if err := fsys.Remove(filepath.Join(dir, cleanShutdownFile)); err == nil {
		l.dirtyDir = true
	}
	if !clean && l.active().size > 0 {
		// What recovery read may have been only in the page cache (a
		// process crash, not a power loss): fsync it before the recovery
		// point vouches for it.
		if err := l.active().log.Sync(); err != nil {
			l.closeAll()
			return nil, err
		}
		l.active().synced, l.active().syncedNext = l.active().size, l.active().next
	}
	if err := durable.SyncDir(fsys, dir); err != nil {
		l.closeAll()
		return nil, err
	}
	l.dirtyDir = false
	if !clean {
		if err := l.Checkpoint(); err != nil {
			l.closeAll()
			return nil, err
		}
	} else if hasRP {
		l.checkpointed = rp
	}
	l.Publish(l.hw)
	return l, nil
}

// damage is corruption found in a segment: where, why, and the offset
// after the last intact batch anywhere in the segment (so the log never
// hands out an offset the segment may have held).
type damage struct {
	offset int64
	reason string
	next   int64
}

func (l *Log) readRecoveryPoint() (recoveryPoint, bool) {
	b, err := vfs.ReadFile(l.env.FS, filepath.Join(l.dir, recoveryPointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return recoveryPoint{}, false
	}
	if err == nil {
		var rp recoveryPoint
		if rp, err = parseRecoveryPoint(b); err == nil {
			return rp, true
		}
	}
	// Without it the last segment is scanned in full: slower, not unsafe.
	l.env.Logger.Warn("ignoring an unreadable recovery point; scanning the last segment in full", "dir", l.dir, "err", err)
	return recoveryPoint{}, false
}

// Checkpoint moves the recovery point up to what the last finished fsync
// covered: the active segment's new index entries are appended and
// fsynced, then the recovery-point file is replaced. Called every minute
// and at shutdown; a no-op when nothing new was synced.
func (l *Log) Checkpoint() error {
	if l.failed != nil {
		return nil
	}
	if err := l.writeRecoveryPoint(); err != nil {
		l.Fail(err)
		return err
	}
	return nil
}

func (l *Log) writeRecoveryPoint() error {
	a := l.active()
	rp := recoveryPoint{base: a.base, pos: a.synced, next: a.syncedNext}
	for _, e := range a.index {
		if int64(e.pos) < a.synced {
			rp.indexEntries++
		}
	}
	for _, e := range a.times {
		if e.offset < a.syncedNext {
			rp.timeEntries++
		}
	}
	if rp == l.checkpointed {
		return nil
	}
	if err := a.flushIndexes(l.env.FS, rp.indexEntries, rp.timeEntries); err != nil {
		return err
	}
	if err := durable.WriteFile(l.env.FS, filepath.Join(l.dir, recoveryPointFile), rp.encode()); err != nil {
		return err
	}
	l.checkpointed = rp
	return nil
}

func (l *Log) closeAll() {
	for _, s := range l.segments {
		s.close()
	}
}

// quarantineSegment applies the corruption policy to segment base.
func (l *Log) quarantineSegment(base int64, bad *damage) error {
	path := segmentPath(l.dir, base, logSuffix)
	if err := l.env.Corrupt(storeName, path, bad.offset, bad.reason); err != nil {
		return err
	}
	// Its indexes are worthless without it; its aborted-transaction index
	// goes with it.
	for _, suf := range []string{indexSuffix, timeIndexSuffix, sealSuffix} {
		_ = l.env.FS.Remove(segmentPath(l.dir, base, suf))
	}
	if txn := segmentPath(l.dir, base, txnIndexSuffix); vfs.Exists(l.env.FS, txn) {
		_ = l.env.Corrupt(storeName, txn, 0, "aborted-transaction index of a quarantined segment")
	}
	l.dirtyDir = true
	return nil
}

// segmentBases lists the base offsets of the .log files in dir, in order,
// and removes leftovers of interrupted writes.
func segmentBases(fsys vfs.FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		name := e.Name()
		// Temporary files of durable.WriteFile, and of earlier versions
		// (<name>.tmp).
		if durable.IsTemp(name) || strings.HasSuffix(name, ".tmp") {
			_ = fsys.Remove(filepath.Join(dir, name))
			continue
		}
		if !strings.HasSuffix(name, logSuffix) {
			continue
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(name, logSuffix), 10, 64)
		if err != nil || len(name) != 20+len(logSuffix) {
			continue
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// openSegment opens one segment. trusted (a sealed segment, or the last
// one after a clean shutdown) means every byte is known durable; rp, for
// the last segment after a crash, says how much is. Damage where data is
// durable is returned as bad (the segment is then closed); a torn tail
// after the durable part is cut.
func (l *Log) openSegment(base int64, trusted bool, rp *recoveryPoint) (seg *segment, bad *damage, err error) {
	path := segmentPath(l.dir, base, logSuffix)
	raw, err := l.env.FS.OpenFile(path, os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("opening segment %d: %w", base, err)
	}
	f := newSegFile(l.env.FS, path, os.O_RDWR, raw)
	st, err := f.Stat()
	if err != nil {
		f.close()
		return nil, nil, err
	}
	s := &segment{dir: l.dir, base: base, log: f, next: base, maxTimestamp: -1, firstTimestamp: -1, created: st.ModTime()}
	fileSize := st.Size()
	if n, ok := l.sealedLength(base); ok {
		// A new owner sealed the segment at n bytes (seal.go).
		if n > fileSize {
			f.close()
			return nil, &damage{offset: fileSize, reason: fmt.Sprintf("the segment was sealed at %d bytes, the file has %d", n, fileSize), next: base}, nil
		}
		if n < fileSize {
			if zeroTail(f, n, fileSize) {
				l.env.Logger.Debug("cutting the room preallocated after a sealed segment", "dir", l.dir,
					"segment", base, "sealed_bytes", n, "file_bytes", fileSize)
			} else {
				l.env.Logger.Warn("cutting bytes written after the segment was sealed (a deposed owner's late write)", "dir", l.dir,
					"segment", base, "sealed_bytes", n, "file_bytes", fileSize)
			}
			if err := f.Truncate(n); err != nil {
				f.close()
				return nil, nil, fmt.Errorf("truncating sealed segment %d: %w", base, err)
			}
			if err := f.Sync(); err != nil {
				f.close()
				return nil, nil, err
			}
			fileSize = n
		}
	}
	durableTo := int64(0)
	switch {
	case trusted:
		durableTo = fileSize
	case rp != nil:
		durableTo = rp.pos
		if rp.pos > fileSize {
			f.close()
			return nil, &damage{offset: fileSize, reason: fmt.Sprintf("the recovery point says %d bytes were fsynced, the file has %d", rp.pos, fileSize), next: rp.next}, nil
		}
	}
	from := int64(0)
	var loadedIndex []indexEntry
	var loadedTimes []timeEntry
	if durableTo > 0 {
		maxIndex, maxTimes := -1, -1
		if rp != nil {
			maxIndex, maxTimes = rp.indexEntries, rp.timeEntries
		}
		if index, times, ok := loadIndexes(l.env.FS, l.dir, base, f, durableTo, maxIndex, maxTimes); ok {
			loadedIndex, loadedTimes = index, times
			last := index[len(index)-1]
			// Keep all but the last entry: the tail scan re-adds it.
			s.index = index[:len(index)-1]
			for _, t := range times {
				if t.offset < base+int64(last.rel) {
					s.times = append(s.times, t)
					if t.ts > s.maxTimestamp {
						s.maxTimestamp = t.ts
					}
				}
			}
			from = int64(last.pos)
			s.next = base + int64(last.rel)
			// Force the tail scan to re-index the entry we dropped.
			s.bytesSinceIdx = l.cfg.IndexIntervalBytes
			s.size = from
		} else {
			l.env.Logger.Info("rebuilding segment index", "dir", l.dir, "segment", base)
		}
	}
	atRP := rp == nil
	end, err := scanSegment(f, from, fileSize, s.next, func(h BatchHeader, pos int64) {
		if rp != nil && pos == rp.pos {
			atRP = h.BaseOffset == rp.next
		}
		s.noteBatch(h, pos, l.cfg.IndexIntervalBytes)
		l.noteScannedEpoch(h)
	})
	if err != nil {
		f.close()
		return nil, nil, fmt.Errorf("scanning segment %d: %w", base, err)
	}
	if rp != nil && end == rp.pos {
		atRP = s.next == rp.next
	}
	// A trusted segment ends at its last batch (roll and Close cut the
	// room first), but zeros after it are no batch whatever vouched for
	// them: they are cut, with a warning, rather than refused as
	// corruption. Refusing would only keep every broker from opening the
	// partition over bytes that hold nothing anyone was told about.
	zerosCut := trusted && end < durableTo && zeroTail(f, end, fileSize)
	if zerosCut {
		l.env.Logger.Warn("cutting zeros after the last batch of a segment known durable (preallocated room a close did not cut; zeros are never a batch)",
			"dir", l.dir, "segment", base, "valid_bytes", end, "file_bytes", fileSize)
		durableTo = end
	}
	if end < durableTo || !atRP {
		reason := "a batch fails its checks (CRC, length or offsets) in data known to be durable"
		if end >= durableTo {
			end, reason = rp.pos, fmt.Sprintf("the recovery point says offset %d starts here, the batches say otherwise", rp.next)
		}
		next := max(s.next, resyncNext(f, end, fileSize))
		if rp != nil {
			next = max(next, rp.next)
		}
		f.close()
		return nil, &damage{offset: end, reason: reason, next: next}, nil
	}
	s.size = end
	if loadedIndex != nil && len(s.index) >= len(loadedIndex) && len(s.times) >= len(loadedTimes) &&
		slices.Equal(s.index[:len(loadedIndex)], loadedIndex) && slices.Equal(s.times[:len(loadedTimes)], loadedTimes) {
		// The files hold these entries: later flushes append after them
		// (exactly when the files held nothing more).
		s.indexFlushed, s.timesFlushed = len(loadedIndex), len(loadedTimes)
		s.indexesExact = rp == nil
	}
	s.alloc = end
	if end < fileSize && !zerosCut && zeroTail(f, end, fileSize) {
		// The zeros preallocated for later batches (segment.go): kept as
		// room, written over by the next appends. (Nothing is written
		// here: a take-over's recovery may read a file its previous owner
		// still writes, and asRecovered then sees the change.)
		s.alloc = fileSize
	} else if end < fileSize {
		if !zerosCut {
			l.env.Logger.Warn("truncating torn segment tail", "dir", l.dir, "segment", base,
				"valid_bytes", end, "file_bytes", fileSize)
		}
		if err := f.Truncate(end); err != nil {
			f.close()
			return nil, nil, fmt.Errorf("truncating segment %d: %w", base, err)
		}
		if err := f.Sync(); err != nil {
			f.close()
			return nil, nil, err
		}
	}
	s.synced, s.syncedNext = durableTo, s.next
	if durableTo < end {
		s.syncedNext = base
		if rp != nil {
			s.syncedNext = rp.next
		}
	}
	if s.firstTimestamp < 0 && s.size >= BatchHeaderSize {
		// The tail scan started after the first batch: read its header.
		var hdr [BatchHeaderSize]byte
		if _, err := f.ReadAt(hdr[:], 0); err == nil {
			if h, err := ParseBatchHeader(hdr[:]); err == nil {
				s.firstTimestamp = h.MaxTimestamp
			}
		}
	}
	if err := s.loadTxnIndex(l.env.FS); err != nil {
		l.env.Logger.Warn("ignoring unreadable txn index", "dir", l.dir, "segment", base, "err", err)
	}
	return s, nil, nil
}

// scanSegment walks batches from pos, checking structure, offset
// continuity and CRC, and returns the end of the last valid batch.
func scanSegment(f io.ReaderAt, pos, fileSize, expectNext int64, note func(BatchHeader, int64)) (int64, error) {
	// Sealed segments are read from their last index entry only: a
	// buffer the size of what is left, not a fixed 1 MiB per segment.
	r := bufio.NewReaderSize(io.NewSectionReader(f, pos, fileSize-pos), int(min(max(fileSize-pos, 4096), 1<<20)))
	var prefix [logOverhead]byte
	var buf []byte
	for {
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return pos, nil // clean end or torn length prefix
		}
		size := int64(int32(binary.BigEndian.Uint32(prefix[8:]))) + logOverhead
		if size < BatchHeaderSize || pos+size > fileSize {
			return pos, nil
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		copy(buf, prefix[:])
		if _, err := io.ReadFull(r, buf[logOverhead:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return pos, nil
			}
			return pos, err
		}
		h, err := ParseBatchHeader(buf)
		// Offsets rise; gaps between batches are what the cleaner leaves.
		if err != nil || h.Magic != 2 || !ValidCRC(buf) || h.BaseOffset < expectNext || h.LastOffsetDelta < 0 {
			return pos, nil
		}
		note(h, pos)
		expectNext = h.NextOffset()
		pos += size
	}
}

// zeroTail reports whether bytes [from, to) of f are all zero: the room
// preallocated after a segment's last batch, or pages a power loss left
// as zeros (never data either way). A tail longer than maxZeroTail is
// cut as a torn one instead, which is as correct, without reading it.
func zeroTail(f io.ReaderAt, from, to int64) bool {
	if to-from > maxZeroTail {
		return false
	}
	buf := make([]byte, min(to-from, 64<<10))
	for pos := from; pos < to; {
		b := buf[:min(to-pos, int64(len(buf)))]
		if _, err := f.ReadAt(b, pos); err != nil && !(errors.Is(err, io.EOF) && pos+int64(len(b)) == to) {
			return false
		}
		for _, c := range b {
			if c != 0 {
				return false
			}
		}
		pos += int64(len(b))
	}
	return true
}

const maxZeroTail = 16 << 20

// resyncNext looks past damage at pos for intact batches (a valid CRC at
// any byte position) and returns the highest offset after one of them, or
// 0: the offsets a quarantined segment may have handed out.
func resyncNext(f io.ReaderAt, pos, fileSize int64) int64 {
	const window = 8 << 20 // batches larger than this are not found
	r := bufio.NewReaderSize(io.NewSectionReader(f, pos, fileSize-pos), window)
	best := int64(0)
	for {
		hdr, err := r.Peek(BatchHeaderSize)
		if err != nil {
			return best
		}
		size := int(int32(binary.BigEndian.Uint32(hdr[8:]))) + logOverhead
		if hdr[batchMagicOffset] == 2 && size >= BatchHeaderSize && size <= window {
			if b, err := r.Peek(size); err == nil && ValidCRC(b) {
				if h, err := ParseBatchHeader(b); err == nil && h.LastOffsetDelta >= 0 {
					best = max(best, h.NextOffset())
					r.Discard(size)
					continue
				}
			}
		}
		r.Discard(1)
	}
}

// loadIndexes reads the stored offset and time indexes (at most maxIndex
// and maxTimes entries when those are >= 0) and sanity-checks them against
// the log file's first durable bytes; ok is false when they must be
// rebuilt.
func loadIndexes(fsys vfs.FS, dir string, base int64, f io.ReaderAt, durableTo int64, maxIndex, maxTimes int) ([]indexEntry, []timeEntry, bool) {
	raw, err := vfs.ReadFile(fsys, segmentPath(dir, base, indexSuffix))
	if maxIndex >= 0 {
		if len(raw) < 8*maxIndex {
			return nil, nil, false
		}
		raw = raw[:8*maxIndex]
	}
	if err != nil || len(raw) == 0 || len(raw)%8 != 0 {
		return nil, nil, false
	}
	index := make([]indexEntry, 0, len(raw)/8)
	for i := 0; i < len(raw); i += 8 {
		e := indexEntry{rel: int32(binary.BigEndian.Uint32(raw[i:])), pos: int32(binary.BigEndian.Uint32(raw[i+4:]))}
		if n := len(index); n > 0 && (e.rel <= index[n-1].rel || e.pos <= index[n-1].pos) {
			return nil, nil, false
		}
		if e.rel < 0 || e.pos < 0 {
			return nil, nil, false
		}
		index = append(index, e)
	}
	if index[0].pos != 0 { // a cleaned segment's first batch may start after its base
		return nil, nil, false
	}
	last := index[len(index)-1]
	var hdr [8]byte
	if int64(last.pos)+BatchHeaderSize > durableTo {
		return nil, nil, false
	}
	if _, err := f.ReadAt(hdr[:], int64(last.pos)); err != nil || int64(binary.BigEndian.Uint64(hdr[:])) != base+int64(last.rel) {
		return nil, nil, false
	}
	traw, err := vfs.ReadFile(fsys, segmentPath(dir, base, timeIndexSuffix))
	if errors.Is(err, fs.ErrNotExist) && maxTimes == 0 {
		traw, err = nil, nil
	}
	if maxTimes >= 0 {
		if len(traw) < 12*maxTimes {
			return nil, nil, false
		}
		traw = traw[:12*maxTimes]
	}
	if err != nil || len(traw)%12 != 0 {
		return nil, nil, false
	}
	var times []timeEntry
	for i := 0; i < len(traw); i += 12 {
		t := timeEntry{ts: int64(binary.BigEndian.Uint64(traw[i:])), offset: base + int64(int32(binary.BigEndian.Uint32(traw[i+8:])))}
		if n := len(times); n > 0 && (t.ts <= times[n-1].ts || t.offset <= times[n-1].offset) {
			return nil, nil, false
		}
		times = append(times, t)
	}
	return index, times, true
}

func (s *segment) loadTxnIndex(fsys vfs.FS) error {
	path := segmentPath(s.dir, s.base, txnIndexSuffix)
	raw, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	whole := len(raw) - len(raw)%txnEntrySize
	for i := 0; i < whole; i += txnEntrySize {
		s.aborted = append(s.aborted, parseAbortedTxn(raw[i:]))
	}
	flag := os.O_RDWR | os.O_APPEND
	f, err := fsys.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	txn := newSegFile(fsys, path, flag, f)
	if whole != len(raw) {
		if err := txn.Truncate(int64(whole)); err != nil {
			txn.close()
			return err
		}
		// Synced so the file may be closed when idle (a file with
		// unsynced changes stays open). Only a torn entry went: a
		// failure here loses nothing anyone was told about, and the
		// next append's fsync reports the disk's state again.
		_ = txn.Sync()
	}
	s.txn = txn
	return nil
}
