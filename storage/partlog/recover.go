package partlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cleanShutdownFile marks a partition directory whose log was closed
// cleanly; without it, start-up scans and validates the active segment.
const cleanShutdownFile = ".clean-shutdown"

// Open opens (creating if needed) the log in dir and recovers it: a torn
// or corrupt tail is truncated to the last whole, CRC-valid batch, and
// missing or damaged indexes are rebuilt.
func Open(dir string, cfg Config, logger *slog.Logger) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	dirFile, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, log: logger, dirFile: dirFile}
	_, statErr := os.Stat(filepath.Join(dir, cleanShutdownFile))
	clean := statErr == nil

	bases, err := segmentBases(dir)
	if err != nil {
		dirFile.Close()
		return nil, err
	}
	for i, base := range bases {
		last := i == len(bases)-1
		// After a crash only the last two segments can hold unsynced bytes (a
		// roll happens between them); older ones get the cheap index check.
		validate := !clean && i >= len(bases)-2
		seg, truncated, rebuilt, err := openSegment(dir, base, cfg.IndexIntervalBytes, validate, logger)
		if err != nil {
			l.closeAll()
			return nil, err
		}
		if rebuilt && !last {
			// A rolled segment's indexes are written only at roll time:
			// write the rebuilt ones now, or every start rebuilds them.
			if err := seg.writeIndexes(); err != nil {
				logger.Warn("could not write rebuilt indexes", "dir", dir, "segment", base, "err", err)
			}
		}
		if n := len(l.segments); n > 0 && l.segments[n-1].next != seg.base {
			logger.Warn("segment does not continue the previous one; dropping it and everything after",
				"dir", dir, "segment", base, "expected_base", l.segments[n-1].next)
			seg.close()
			l.dropFrom(bases[i:])
			break
		}
		l.segments = append(l.segments, seg)
		if truncated && !last {
			logger.Warn("torn segment before the last one; dropping the segments after it", "dir", dir, "segment", base)
			l.dropFrom(bases[i+1:])
			break
		}
	}
	start, hasStart := readLogStart(dir)
	if len(l.segments) == 0 {
		base := int64(0)
		if hasStart {
			base = start
		}
		seg, err := createSegment(dir, base, time.Now())
		if err != nil {
			l.closeAll()
			return nil, err
		}
		l.segments = []*segment{seg}
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
	_ = os.Remove(filepath.Join(dir, cleanShutdownFile))
	if err := l.dirFile.Sync(); err != nil {
		l.closeAll()
		return nil, fmt.Errorf("fsync %s: %w", dir, err)
	}
	l.Publish(l.hw)
	return l, nil
}

// MarkCleanShutdown records that Close completed, so the next start can
// trust the indexes. Call after Close succeeded.
func MarkCleanShutdown(dir string) error {
	return os.WriteFile(filepath.Join(dir, cleanShutdownFile), nil, 0o644)
}

func (l *Log) closeAll() {
	for _, s := range l.segments {
		s.close()
	}
	l.dirFile.Close()
}

func (l *Log) dropFrom(bases []int64) {
	for _, b := range bases {
		(&segment{dir: l.dir, base: b}).removeFiles()
	}
}

// segmentBases lists the base offsets of the .log files in dir, in order,
// and removes leftovers of interrupted writes.
func segmentBases(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(dir, name))
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

// openSegment opens one segment. With validate, the whole file is scanned
// and CRC-checked and the indexes rebuilt; otherwise stored indexes are
// used when they pass a sanity check, and only the tail after the last
// index entry is scanned. It reports whether the tail was truncated and
// whether the indexes were rebuilt rather than loaded.
func openSegment(dir string, base, indexInterval int64, validate bool, logger *slog.Logger) (seg *segment, truncated, rebuilt bool, err error) {
	f, err := os.OpenFile(segmentPath(dir, base, logSuffix), os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, false, fmt.Errorf("opening segment %d: %w", base, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, false, err
	}
	s := &segment{dir: dir, base: base, log: f, next: base, maxTimestamp: -1, firstTimestamp: -1, created: st.ModTime()}
	fileSize := st.Size()

	from := int64(0)
	rebuilt = true
	if !validate {
		if index, times, ok := loadIndexes(dir, base, f, fileSize); ok {
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
			s.bytesSinceIdx = indexInterval
			s.size = from
			rebuilt = false
		} else {
			logger.Info("rebuilding segment index", "dir", dir, "segment", base)
		}
	}
	end, err := scanSegment(f, from, fileSize, s.next, func(h BatchHeader, pos int64) {
		s.noteBatch(h, pos, indexInterval)
	})
	if err != nil {
		f.Close()
		return nil, false, false, fmt.Errorf("scanning segment %d: %w", base, err)
	}
	s.size = end
	truncated = end < fileSize
	if truncated {
		logger.Warn("truncating torn or corrupt segment tail", "dir", dir, "segment", base,
			"valid_bytes", end, "file_bytes", fileSize)
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, false, false, fmt.Errorf("truncating segment %d: %w", base, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, false, false, err
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
	if err := s.loadTxnIndex(); err != nil {
		logger.Warn("ignoring unreadable txn index", "dir", dir, "segment", base, "err", err)
	}
	return s, truncated, rebuilt, nil
}

// scanSegment walks batches from pos, checking structure, offset
// continuity and CRC, and returns the end of the last valid batch.
func scanSegment(f *os.File, pos, fileSize, expectNext int64, note func(BatchHeader, int64)) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, pos, fileSize-pos), 1<<20)
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
		if err != nil || h.Magic != 2 || !ValidCRC(buf) || h.BaseOffset != expectNext || h.LastOffsetDelta < 0 {
			return pos, nil
		}
		note(h, pos)
		expectNext = h.NextOffset()
		pos += size
	}
}

// loadIndexes reads the stored offset and time indexes and sanity-checks
// them against the log file; ok is false when they must be rebuilt.
func loadIndexes(dir string, base int64, f *os.File, fileSize int64) ([]indexEntry, []timeEntry, bool) {
	raw, err := os.ReadFile(segmentPath(dir, base, indexSuffix))
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
	if index[0].rel != 0 || index[0].pos != 0 {
		return nil, nil, false
	}
	last := index[len(index)-1]
	var hdr [8]byte
	if int64(last.pos)+BatchHeaderSize > fileSize {
		return nil, nil, false
	}
	if _, err := f.ReadAt(hdr[:], int64(last.pos)); err != nil || int64(binary.BigEndian.Uint64(hdr[:])) != base+int64(last.rel) {
		return nil, nil, false
	}
	traw, err := os.ReadFile(segmentPath(dir, base, timeIndexSuffix))
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

func (s *segment) loadTxnIndex() error {
	path := segmentPath(s.dir, s.base, txnIndexSuffix)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	whole := len(raw) - len(raw)%txnEntrySize
	for i := 0; i < whole; i += txnEntrySize {
		s.aborted = append(s.aborted, parseAbortedTxn(raw[i:]))
	}
	if whole != len(raw) {
		if err := os.Truncate(path, int64(whole)); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.txn = f
	return nil
}
