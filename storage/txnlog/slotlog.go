package txnlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// record is one line of a slot log: "<crc32c hex> <json>\n". The CRC makes
// a torn last line detectable after a crash.
type record struct {
	Op               string `json:"op"` // "put", "del", "epoch"
	Entry            *Entry `json:"entry,omitempty"`
	ID               string `json:"id,omitempty"`
	CoordinatorEpoch int32  `json:"coordinator_epoch,omitempty"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeRecord(r record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	line := make([]byte, 0, len(body)+10)
	line = append(line, fmt.Sprintf("%08x ", crc32.Checksum(body, castagnoli))...)
	line = append(line, body...)
	return append(line, '\n'), nil
}

// slotLog is one slot's append-only file with group commit: every writer
// appends under mu; one of the waiting writers fsyncs for all of them.
type slotLog struct {
	path string

	mu      sync.Mutex
	cond    *sync.Cond
	f       *os.File
	size    int64
	written uint64 // records appended
	synced  uint64 // records covered by a finished fsync
	syncing bool
	syncErr error
	records int // records in the file (for compaction)
	entries map[string]Entry
	epoch   int32 // coordinator epoch of this slot
}

// openSlot replays path, truncating a torn or corrupt tail.
func openSlot(path string) (*slotLog, error) {
	s := &slotLog{path: path, entries: make(map[string]Entry)}
	s.cond = sync.NewCond(&s.mu)
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	valid := 0
	for len(raw[valid:]) > 0 {
		nl := bytes.IndexByte(raw[valid:], '\n')
		if nl < 0 {
			break
		}
		line := raw[valid : valid+nl]
		r, ok := decodeRecord(line)
		if !ok {
			break
		}
		s.apply(r)
		s.records++
		valid += nl + 1
	}
	if s.f, err = os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644); err != nil {
		return nil, err
	}
	if valid < len(raw) {
		if err := s.f.Truncate(int64(valid)); err != nil {
			s.f.Close()
			return nil, fmt.Errorf("truncating torn tail of %s: %w", path, err)
		}
	}
	s.size = int64(valid)
	return s, nil
}

func decodeRecord(line []byte) (record, bool) {
	var r record
	if len(line) < 10 || line[8] != ' ' {
		return r, false
	}
	want, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(line[9:], castagnoli) {
		return r, false
	}
	if json.Unmarshal(line[9:], &r) != nil {
		return r, false
	}
	return r, true
}

func (s *slotLog) apply(r record) {
	switch r.Op {
	case "put":
		if r.Entry != nil {
			s.entries[r.Entry.TransactionalID] = *r.Entry
		}
	case "del":
		delete(s.entries, r.ID)
	case "epoch":
		s.epoch = r.CoordinatorEpoch
	}
}

// append writes r and returns once an fsync covers it.
func (s *slotLog) append(r record) error {
	line, err := encodeRecord(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.WriteAt(line, s.size); err != nil {
		_ = s.f.Truncate(s.size)
		return fmt.Errorf("appending to %s: %w", s.path, err)
	}
	s.size += int64(len(line))
	s.written++
	s.records++
	mine := s.written
	for s.synced < mine {
		if s.syncing {
			s.cond.Wait()
			continue
		}
		s.syncing = true
		target := s.written
		s.mu.Unlock()
		err := unix.Fdatasync(int(s.f.Fd()))
		s.mu.Lock()
		s.syncing = false
		if err != nil {
			s.syncErr = fmt.Errorf("fsync %s: %w", s.path, err)
		} else {
			s.synced = target
			s.syncErr = nil
		}
		s.cond.Broadcast()
		if err != nil {
			return s.syncErr
		}
	}
	s.apply(r)
	return nil
}

// compactIfLarge rewrites the file with only the live entries once it holds
// many more records than entries.
func (s *slotLog) compactIfLarge() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.records < 1000 || s.records < 4*(len(s.entries)+1) {
		return nil
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	lines := 0
	write := func(r record) error {
		line, err := encodeRecord(r)
		if err != nil {
			return err
		}
		lines++
		_, err = w.Write(line)
		return err
	}
	if err := write(record{Op: "epoch", CoordinatorEpoch: s.epoch}); err != nil {
		return err
	}
	for _, e := range s.entries {
		e := e
		if err := write(record{Op: "put", Entry: &e}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// Writers are excluded by mu, so nothing lands in the old file after
	// the copy is taken.
	if err := durable.WriteFile(vfs.OS, s.path, buf.Bytes()); err != nil {
		return fmt.Errorf("compacting %s: %w", s.path, err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	s.f.Close()
	s.f = f
	s.size = int64(buf.Len())
	s.records = lines
	return nil
}

func (s *slotLog) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Close()
}
