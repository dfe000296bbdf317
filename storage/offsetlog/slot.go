package offsetlog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"kaas/storage/durable"
)

// Options tune a Dir.
type Options struct {
	// CompactMinBytes: a slot log smaller than this is never compacted.
	// Zero means 4 MiB.
	CompactMinBytes int64
}

func (o Options) compactMin() int64 {
	if o.CompactMinBytes <= 0 {
		return 4 << 20
	}
	return o.CompactMinBytes
}

// Dir is the offsets directory: one log per slot, created on first write.
type Dir struct {
	path  string
	opts  Options
	log   *slog.Logger
	slots map[int]*Slot
}

// Slot is one slot's log file and its replayed state. Not safe for
// concurrent use: the offsets writer actor owns every Slot.
type Slot struct {
	Num   int
	path  string
	f     *os.File
	size  int64
	state *State
	// compactAt is the size that triggers the next compaction: twice the
	// live size after the last one, at least Options.CompactMinBytes.
	compactAt int64
	opts      Options
	log       *slog.Logger
	// failed is set once a write or fsync failed; the slot then refuses
	// appends, since what the file holds is no longer known.
	failed error
}

var slotFile = regexp.MustCompile(`^slot-(\d+)\.log$`)

// FileName is the log file of slot n.
func FileName(n int) string { return fmt.Sprintf("slot-%02d.log", n) }

// OpenDir recovers every slot log under path (creating path if needed):
// each log is read to its end, a torn or corrupt tail is cut off, and its
// records are replayed.
func OpenDir(path string, opts Options, logger *slog.Logger) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("creating offsets directory: %w", err)
	}
	d := &Dir{path: path, opts: opts, log: logger, slots: map[int]*Slot{}}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("listing offsets directory: %w", err)
	}
	for _, ent := range ents {
		m := slotFile.FindStringSubmatch(ent.Name())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		s, err := openSlot(filepath.Join(path, ent.Name()), n, opts, logger)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.slots[n] = s
	}
	return d, nil
}

// Existing lists the slots that have a log, in order.
func (d *Dir) Existing() []*Slot {
	out := make([]*Slot, 0, len(d.slots))
	for _, s := range d.slots {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Num < out[j].Num })
	return out
}

// Slot returns slot n's log, creating its file on first use.
func (d *Dir) Slot(n int) (*Slot, error) {
	if s := d.slots[n]; s != nil {
		return s, nil
	}
	path := filepath.Join(d.path, FileName(n))
	s, err := openSlot(path, n, d.opts, d.log)
	if err != nil {
		return nil, err
	}
	if err := durable.SyncDir(d.path); err != nil {
		s.Close()
		return nil, err
	}
	d.slots[n] = s
	return s, nil
}

// Close closes every slot log.
func (d *Dir) Close() error {
	var errs []error
	for _, s := range d.slots {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

func openSlot(path string, n int, opts Options, logger *slog.Logger) (*Slot, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	s := &Slot{Num: n, path: path, f: f, state: NewState(), opts: opts, log: logger.With("offsets_slot", n)}
	if err := s.recover(); err != nil {
		f.Close()
		return nil, err
	}
	s.compactAt = s.nextCompaction()
	if s.size > s.compactAt {
		if err := s.Compact(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return s, nil
}

// recover replays the file and cuts off whatever follows the last intact
// frame (a write torn by a crash never got its fsync, so nobody was told
// it succeeded).
func (s *Slot) recover() error {
	data, err := io.ReadAll(s.f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", s.path, err)
	}
	off := 0
	for off < len(data) {
		e, first, n, err := readFrame(data[off:])
		if err != nil {
			s.log.Warn("cutting the torn tail of an offsets log", "file", s.path, "at", off, "dropped_bytes", len(data)-off, "err", err)
			if err := s.f.Truncate(int64(off)); err != nil {
				return fmt.Errorf("truncating %s: %w", s.path, err)
			}
			if err := s.f.Sync(); err != nil {
				return fmt.Errorf("fsync %s: %w", s.path, err)
			}
			break
		}
		if err := s.state.Apply(&e, first); err != nil {
			s.log.Warn("skipping undecodable records in an offsets log", "file", s.path, "at", off, "err", err)
		}
		off += n
	}
	s.size = int64(off)
	if _, err := s.f.Seek(s.size, io.SeekStart); err != nil {
		return fmt.Errorf("seeking %s: %w", s.path, err)
	}
	return nil
}

// State is the slot's replayed state, kept current by Append. The caller
// must not modify it.
func (s *Slot) State() *State { return s.state }

// Size is the log's length in bytes.
func (s *Slot) Size() int64 { return s.size }

// Failed reports the write or fsync error that stopped the slot, if any.
func (s *Slot) Failed() error { return s.failed }

// Append writes e (not yet durable: Sync makes it so) and applies it to
// the state, returning the sequence number of its first record.
func (s *Slot) Append(e *Entry) (uint64, error) {
	if s.failed != nil {
		return 0, s.failed
	}
	first := s.state.NextSeq
	buf := appendFrame(nil, e, first)
	if _, err := s.f.Write(buf); err != nil {
		// Take back a partial frame so later frames do not land behind
		// garbage that recovery would cut, together with them.
		if terr := s.f.Truncate(s.size); terr != nil {
			s.failed = fmt.Errorf("writing %s: %w (and truncating back: %v)", s.path, err, terr)
			return 0, s.failed
		}
		if _, serr := s.f.Seek(s.size, io.SeekStart); serr != nil {
			s.failed = fmt.Errorf("writing %s: %w (and seeking back: %v)", s.path, err, serr)
			return 0, s.failed
		}
		return 0, fmt.Errorf("writing %s: %w", s.path, err)
	}
	s.size += int64(len(buf))
	if err := s.state.Apply(e, first); err != nil {
		s.log.Warn("appended records the state cannot decode", "err", err)
	}
	return first, nil
}

// Sync makes every appended frame durable. After a failed fsync the page
// cache may have dropped the data, so the slot stops taking writes.
func (s *Slot) Sync() error {
	if s.failed != nil {
		return s.failed
	}
	if err := s.f.Sync(); err != nil {
		s.failed = fmt.Errorf("fsync %s: %w", s.path, err)
		return s.failed
	}
	return nil
}

// NeedsCompaction reports whether the log has grown past twice its live
// size (and the minimum).
func (s *Slot) NeedsCompaction() bool { return s.failed == nil && s.size > s.compactAt }

func (s *Slot) nextCompaction() int64 {
	live := int64(0)
	for _, e := range s.state.Snapshot() {
		live += int64(len(appendFrame(nil, &e.Entry, e.FirstSeq)))
	}
	if at := 2 * live; at > s.opts.compactMin() {
		return at
	}
	return s.opts.compactMin()
}

// Compact replaces the log with a snapshot of its state (written to a
// temporary file, fsynced and renamed over the log, so a crash leaves one
// or the other). Call it only when everything appended has been synced.
func (s *Slot) Compact() error {
	var buf []byte
	for _, e := range s.state.Snapshot() {
		buf = appendFrame(buf, &e.Entry, e.FirstSeq)
	}
	before := s.size
	if err := durable.WriteFile(s.path, buf); err != nil {
		return fmt.Errorf("compacting %s: %w", s.path, err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0o644)
	if err != nil {
		s.failed = fmt.Errorf("reopening %s after compaction: %w", s.path, err)
		return s.failed
	}
	if _, err := f.Seek(int64(len(buf)), io.SeekStart); err != nil {
		f.Close()
		s.failed = fmt.Errorf("seeking %s after compaction: %w", s.path, err)
		return s.failed
	}
	s.f.Close()
	s.f, s.size = f, int64(len(buf))
	s.compactAt = max(2*s.size, s.opts.compactMin())
	s.log.Info("compacted offsets log", "file", s.path, "before_bytes", before, "after_bytes", s.size)
	return nil
}

// Close closes the file (appends are fsynced by the caller first).
func (s *Slot) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
