package partlog

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"
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
	dir     string
	base    int64
	log     *os.File
	size    int64 // bytes written
	visible int64 // bytes below the high watermark, readable by fetches
	next    int64 // offset after the last batch

	index         []indexEntry
	bytesSinceIdx int64
	times         []timeEntry
	maxTimestamp  int64
	// firstTimestamp is the max timestamp of the segment's first batch
	// (-1 while empty): segment.ms counts from it, as Apache's
	// rollingBasedTimestamp does, so the age survives restarts.
	firstTimestamp int64
	created        time.Time // segment.ms fallback for a segment without timestamps

	txn     *os.File // opened on the first aborted transaction
	aborted []AbortedTxn
}

func createSegment(dir string, base int64, now time.Time) (*segment, error) {
	f, err := os.OpenFile(segmentPath(dir, base, logSuffix), os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating segment %d: %w", base, err)
	}
	return &segment{dir: dir, base: base, log: f, next: base, maxTimestamp: -1, firstTimestamp: -1, created: now}, nil
}

// appendBatch writes a batch whose base offset is already set.
func (s *segment) appendBatch(batch []byte, h BatchHeader, indexInterval int64) error {
	pos := s.size
	if _, err := s.log.WriteAt(batch, pos); err != nil {
		return fmt.Errorf("writing segment %d: %w", s.base, err)
	}
	s.size += int64(len(batch))
	s.noteBatch(h, pos, indexInterval)
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

func (s *segment) appendAborted(a AbortedTxn) error {
	if s.txn == nil {
		f, err := os.OpenFile(segmentPath(s.dir, s.base, txnIndexSuffix), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening txn index of segment %d: %w", s.base, err)
		}
		s.txn = f
	}
	if _, err := s.txn.Write(a.appendTo(nil)); err != nil {
		return fmt.Errorf("writing txn index of segment %d: %w", s.base, err)
	}
	s.aborted = append(s.aborted, a)
	return nil
}

// writeIndexes persists the offset and time indexes (Apache's formats:
// 8-byte and 12-byte entries, offsets relative to the base).
func (s *segment) writeIndexes() error {
	idx := make([]byte, 0, 8*len(s.index))
	for _, e := range s.index {
		idx = binary.BigEndian.AppendUint32(idx, uint32(e.rel))
		idx = binary.BigEndian.AppendUint32(idx, uint32(e.pos))
	}
	if err := writeSynced(segmentPath(s.dir, s.base, indexSuffix), idx); err != nil {
		return fmt.Errorf("writing offset index of segment %d: %w", s.base, err)
	}
	tix := make([]byte, 0, 12*len(s.times))
	for _, e := range s.times {
		tix = binary.BigEndian.AppendUint64(tix, uint64(e.ts))
		tix = binary.BigEndian.AppendUint32(tix, uint32(e.offset-s.base))
	}
	if err := writeSynced(segmentPath(s.dir, s.base, timeIndexSuffix), tix); err != nil {
		return fmt.Errorf("writing time index of segment %d: %w", s.base, err)
	}
	return nil
}

// writeSynced writes an index file and fsyncs it, so a clean-shutdown
// marker written afterwards never vouches for an index still in the page
// cache. (The directory entry is fsynced with the next log sync.)
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *segment) close() error {
	err := s.log.Close()
	if s.txn != nil {
		if e := s.txn.Close(); err == nil {
			err = e
		}
	}
	return err
}

func (s *segment) removeFiles() {
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		_ = os.Remove(segmentPath(s.dir, s.base, suf))
	}
}
