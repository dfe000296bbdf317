package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"kaas/storage/vfs"
)

// File name suffixes of one segment (Apache's layout).
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	txnIndexSuffix  = ".txnindex"
)

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// indexEntry maps an offset (relative to the segment base) to the file
// position of the batch that starts at it.
type indexEntry struct {
	rel int32
	pos int32
}

// timeEntry records the largest timestamp seen so far and the base offset
// of the batch that raised it.
type timeEntry struct {
	ts     int64
	offset int64
}

// AbortedTxn is one .txnindex entry (spec R-MRK-5).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64 // offset of the ABORT marker
	LastStableOffset int64
}

const txnEntrySize = 34

func (a AbortedTxn) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(a.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(a.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(a.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(a.LastStableOffset))
}

func parseAbortedTxn(b []byte) AbortedTxn {
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}
}

// segment is one log file and its indexes. Only the owning Log mutates it;
// readers see copies of its fields through a View.
type segment struct {
	dir  string
	base int64
	log  *segFile
	size int64 // bytes written
	// alloc is the log file's length: size plus the zeros preallocated
	// after the last batch (see preallocChunk). Only the active segment
	// has any: roll and Close cut them.
	alloc   int64
	visible int64 // bytes below the high watermark, readable by fetches
	next    int64 // offset after the last batch
	// synced is how many bytes a finished fsync covers, and syncedNext
	// the offset after them (the recovery point may move up to there).
	synced, syncedNext int64

	index         []indexEntry
	bytesSinceIdx int64
	// recent are the last batches appended, newest first: a caught-up
	// consumer fetches from one of them, found without walking batch
	// headers from the sparse index (View.find). Made by the first
	// append: a segment nothing was appended to since it was opened (every
	// idle partition's) carries no 128 bytes of zeros, nor do its views.
	recent       *recentRefs
	times        []timeEntry
	maxTimestamp int64
	// firstTimestamp is the max timestamp of the segment's first batch
	// (-1 while empty): segment.ms counts from it, as Apache's
	// rollingBasedTimestamp does, so the age survives restarts.
	firstTimestamp int64
	created        time.Time // segment.ms fallback for a segment without timestamps

	txn     *segFile // created with the first aborted transaction
	aborted []AbortedTxn

	// indexFlushed and timesFlushed entries of index and times are in
	// the index files; indexesExact says the files hold exactly those
	// (after recovery they may hold more, from before a crash).
	indexFlushed, timesFlushed int
	indexesExact               bool
}

func createSegment(fsys vfs.FS, dir string, base int64, now time.Time) (*segment, error) {
	path := segmentPath(dir, base, logSuffix)
	flag := os.O_CREATE | os.O_RDWR | os.O_EXCL
	f, err := fsys.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating segment %d: %w", base, err)
	}
	return &segment{dir: dir, base: base, log: newSegFile(fsys, path, flag, f), next: base, syncedNext: base, maxTimestamp: -1, firstTimestamp: -1, created: now}, nil
}

// preallocChunk is how far past its last batch the active segment's file
// is extended with zeros when a batch does not fit in the room left.
//
// An fdatasync that extends a file journals the new size and extents; one
// that only overwrites blocks already in the file has nothing to journal,
// and costs this process markedly less CPU on the project's VM (the slot
// logs measured 236 -> 158 us per fsync the same way). Every
// acknowledgement waits for a partition log fsync, and a transaction's
// batch and marker are a few hundred bytes: 64 KiB of room makes all but
// one fsync in hundreds an overwrite in place.
//
// The zeros are never data: a batch's length field is never zero, so a
// scan ends at them (recover.go keeps an all-zero tail of the last
// segment as room, and cuts a torn batch in front of it as any torn tail),
// offsets go on from the last whole batch, and roll and Close cut the
// room before a segment becomes trusted (sealed, or cleanly shut down).
const preallocChunk = 64 << 10

// A flush window that outgrows the room gains nothing from it: when the
// bytes written since the last fsync already reach preallocChunk, the
// next fsync extends the file whatever is written now, and zeros written
// ahead would only be written to disk by that fsync and again, as data,
// by the next (BenchmarkAppendSync at 100 KiB a sync: 0.9-1.3 ms and
// 170-220 us of CPU a sync extending, 2.0-2.3 ms and 245-290 us with the
// room; at 16 and 40 KiB the room wins). A producer at full rate fsyncs
// windows of that size, so such a window extends the file, as it would
// without preallocation, and the room comes back with the first window
// that stays small.

// zeros is what the room is written with.
var zeros [preallocChunk + 4096]byte

// roomRule is when a batch past the room writes more: roomUnlessLarge
// always but in BenchmarkAppendSync, which measures the other two
// against it (the figures the rule is kept for).
var roomRule = roomUnlessLarge

const (
	roomUnlessLarge = iota // room unless the flush window outgrew it
	roomAlways             // room after every batch past it
	roomNever              // no room: every write extends the file
)

// appendBatch writes a batch whose base offset is already set.
func (s *segment) appendBatch(batch []byte, h BatchHeader, indexInterval int64) error {
	pos := s.size
	if _, err := s.log.WriteAt(batch, pos); err != nil {
		return fmt.Errorf("writing segment %d: %w", s.base, err)
	}
	s.size += int64(len(batch))
	if s.size > s.alloc && roomRule != roomNever {
		room := roomRule == roomAlways || s.size-s.synced < preallocChunk
		if err := s.preallocate(room); err != nil {
			return err
		}
	}
	s.noteBatch(h, pos, indexInterval)
	return nil
}

// preallocate extends the file with zeros after the last batch, to the
// page boundary preallocChunk past it. A full disk only leaves less room
// (the batch itself is written); any other failure is final, as for the
// batch.
//
// It runs only after a batch that went past the room, so the file must
// end exactly at that batch. A file that does not is being written by
// someone else — in a cluster, the owner that took the partition over
// from this (deposed) one, whose segment a reopen found at the path
// where no inode generation tells files apart (NFS) — and the zeros would
// overwrite up to 64 KiB of its records, where the late batch alone
// overwrites its own length: refused, final (ErrSegmentReplaced).
// One fstat per 64 KiB appended. Without room (a window larger than it,
// above) the file is checked all the same, so that a replaced segment
// is found as soon as with room.
func (s *segment) preallocate(room bool) error {
	fi, err := s.log.Stat()
	if err != nil {
		return fmt.Errorf("preallocating segment %d: %w", s.base, err)
	}
	if fi.Size() != s.size {
		return fmt.Errorf("preallocating segment %d: the file is %d bytes, this log wrote %d: %w", s.base, fi.Size(), s.size, ErrSegmentReplaced)
	}
	if !room {
		s.alloc = s.size
		return nil
	}
	end := (s.size + preallocChunk + 4095) &^ 4095
	n, err := s.log.WriteAt(zeros[:end-s.size], s.size)
	s.alloc = s.size + int64(n)
	if err != nil && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("preallocating segment %d: %w", s.base, err)
	}
	return nil
}

// cutRoom truncates the preallocated zeros, so the file ends at its last
// batch (before the segment is sealed or the log closed: a trusted
// segment's every byte is data).
func (s *segment) cutRoom() error {
	if s.alloc <= s.size {
		return nil
	}
	if err := s.log.Truncate(s.size); err != nil {
		return fmt.Errorf("cutting the preallocated room of segment %d: %w", s.base, err)
	}
	s.alloc = s.size
	return nil
}

// noteBatch updates the in-memory indexes for a batch at pos; recovery
// rebuilds indexes through it too, so both produce the same entries.
//
// A time entry (ts, offset) says every batch before offset has a max
// timestamp of at most ts, so a lookup for target may start at the last
// entry with ts < target.
func (s *segment) noteBatch(h BatchHeader, pos int64, indexInterval int64) {
	if len(s.index) == 0 || s.bytesSinceIdx >= indexInterval {
		s.index = append(s.index, indexEntry{rel: int32(h.BaseOffset - s.base), pos: int32(pos)})
		s.bytesSinceIdx = 0
		if s.maxTimestamp >= 0 && (len(s.times) == 0 || s.times[len(s.times)-1].ts < s.maxTimestamp) {
			s.times = append(s.times, timeEntry{ts: s.maxTimestamp, offset: h.BaseOffset})
		}
	}
	s.bytesSinceIdx += h.Size()
	if s.recent == nil {
		s.recent = new(recentRefs)
	}
	copy(s.recent[1:], s.recent[:recentBatches-1])
	s.recent[0] = batchRef{pos: pos, size: h.Size(), base: h.BaseOffset, lastOffs: h.NextOffset() - 1}
	if pos == 0 {
		s.firstTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp = h.MaxTimestamp
	}
	s.next = h.NextOffset()
}

// largestTimestamp is what retention.ms measures a segment's age by: its
// largest record timestamp, or its creation time if it has none (Apache
// uses the file's modification time there).
func (s *segment) largestTimestamp() int64 {
	if s.maxTimestamp >= 0 {
		return s.maxTimestamp
	}
	return s.created.UnixMilli()
}

func (s *segment) appendAborted(fsys vfs.FS, a AbortedTxn) error {
	if s.txn == nil {
		path := segmentPath(s.dir, s.base, txnIndexSuffix)
		flag := os.O_CREATE | os.O_RDWR | os.O_APPEND
		f, err := fsys.OpenFile(path, flag, 0o644)
		if err != nil {
			return fmt.Errorf("opening txn index of segment %d: %w", s.base, err)
		}
		s.txn = newSegFile(fsys, path, flag, f)
	}
	if _, err := s.txn.Write(a.appendTo(nil)); err != nil {
		return fmt.Errorf("writing txn index of segment %d: %w", s.base, err)
	}
	s.aborted = append(s.aborted, a)
	return nil
}

// indexBytes encodes all of the offset and time indexes.
func (s *segment) indexBytes() (idx, tix []byte) {
	for _, e := range s.index {
		idx = binary.BigEndian.AppendUint32(idx, uint32(e.rel))
		idx = binary.BigEndian.AppendUint32(idx, uint32(e.pos))
	}
	for _, e := range s.times {
		tix = binary.BigEndian.AppendUint64(tix, uint64(e.ts))
		tix = binary.BigEndian.AppendUint32(tix, uint32(e.offset-s.base))
	}
	return idx, tix
}

// writeIndexes persists all of the offset and time indexes.
func (s *segment) writeIndexes(fsys vfs.FS) error {
	return s.flushIndexes(fsys, len(s.index), len(s.times))
}

// flushIndexes makes the first nIndex offset-index and nTimes time-index
// entries durable (Apache's formats: 8-byte and 12-byte entries, offsets
// relative to the base). Only entries not yet written are written: the
// files are cut to what was flushed before and the rest appended, then
// fsynced, so the clean-shutdown marker or a recovery point written
// afterwards never vouches for an index still in the page cache. (New
// files' directory entries are fsynced with the next directory sync.)
func (s *segment) flushIndexes(fsys vfs.FS, nIndex, nTimes int) error {
	if !s.indexesExact || nIndex != s.indexFlushed {
		idx := make([]byte, 0, 8*(nIndex-s.indexFlushed))
		for _, e := range s.index[s.indexFlushed:nIndex] {
			idx = binary.BigEndian.AppendUint32(idx, uint32(e.rel))
			idx = binary.BigEndian.AppendUint32(idx, uint32(e.pos))
		}
		if err := writeEntries(fsys, segmentPath(s.dir, s.base, indexSuffix), int64(8*s.indexFlushed), idx); err != nil {
			return fmt.Errorf("writing offset index of segment %d: %w", s.base, err)
		}
		s.indexFlushed = nIndex
	}
	if !s.indexesExact || nTimes != s.timesFlushed {
		tix := make([]byte, 0, 12*(nTimes-s.timesFlushed))
		for _, e := range s.times[s.timesFlushed:nTimes] {
			tix = binary.BigEndian.AppendUint64(tix, uint64(e.ts))
			tix = binary.BigEndian.AppendUint32(tix, uint32(e.offset-s.base))
		}
		if err := writeEntries(fsys, segmentPath(s.dir, s.base, timeIndexSuffix), int64(12*s.timesFlushed), tix); err != nil {
			return fmt.Errorf("writing time index of segment %d: %w", s.base, err)
		}
		s.timesFlushed = nTimes
	}
	s.indexesExact = true
	return nil
}

// writeEntries cuts an index file to keep bytes, appends data and fsyncs.
func writeEntries(fsys vfs.FS, path string, keep int64, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	err = f.Truncate(keep)
	if err == nil {
		_, err = f.WriteAt(data, keep)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *segment) close() error {
	err := s.log.close()
	if s.txn != nil {
		if e := s.txn.close(); err == nil {
			err = e
		}
	}
	return err
}

// pinFiles keeps the segment's files open (unpinFiles closes them for
// good): a deleted segment stays readable through its descriptors for
// fetches holding an older view. A file that cannot be opened is not
// pinned; such a fetch then fails as if it came after the delay.
func (s *segment) pinFiles() (unpin func()) {
	var pinned []*segFile
	for _, f := range []*segFile{s.log, s.txn} {
		if f != nil && f.pin() {
			pinned = append(pinned, f)
		}
	}
	return func() {
		for _, f := range pinned {
			f.unpin()
		}
		_ = s.close()
	}
}

func (s *segment) removeFiles(fsys vfs.FS) {
	for _, suf := range segmentSuffixes {
		_ = fsys.Remove(segmentPath(s.dir, s.base, suf))
	}
}

var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix, sealSuffix}
