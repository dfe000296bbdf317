package offsetlog

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"kaas/storage/durable"
	"kaas/storage/slotlog"
)

// Options tune a Dir.
type Options struct {
	// CompactMinBytes: a slot log smaller than this is never compacted.
	// Zero means 4 MiB.
	CompactMinBytes int64
	// Now is the view's clock (tombstone retention); nil means time.Now.
	Now func() time.Time
}

func (o Options) compactMin() int64 {
	if o.CompactMinBytes <= 0 {
		return 4 << 20
	}
	return o.CompactMinBytes
}

// Dir is the offsets directory: one log per slot. A single broker's Dir
// (OpenDir) owns every slot and creates a slot's file on its first write;
// a cluster broker's (NewDir) holds only the slots it claimed.
type Dir struct {
	path  string
	env   durable.Env
	opts  Options
	slots map[int]*Slot
	all   bool // every slot is this broker's
}

// ErrNotOwned refuses a slot a cluster broker has not claimed.
var ErrNotOwned = errors.New("offsets slot not owned by this broker")

// Slot is one slot's log file and its replayed state. Not safe for
// concurrent use: the offsets writer actor owns every Slot.
type Slot struct {
	Num   int
	log   *slotlog.Log
	state *State
	// view is the records as __consumer_offsets partition Num (view.go);
	// appends enter it once durable, queued in undurable until then.
	view      *View
	undurable []queuedEntry
	// compactAt is the size that triggers the next compaction: twice the
	// live size after the last one, at least Options.CompactMinBytes.
	compactAt int64
	opts      Options
	lg        *slog.Logger
}

// store names the offsets logs in logs and metrics.
const store = "offsets log"

// FileName is the log file of slot n (generation 0).
func FileName(n int) string { return fileBase(n) + ".log" }

func fileBase(n int) string { return fmt.Sprintf("slot-%02d", n) }

// OpenDir recovers every slot log under path (creating path if needed):
// each log is read to its end and its records replayed; a torn tail is
// cut, and damage in records that were durable stops the open (or with
// --skip-corrupt, quarantines the file and keeps every intact record:
// storage/slotlog). The Dir owns every slot.
func OpenDir(env durable.Env, path string, opts Options) (*Dir, error) {
	d, err := NewDir(env, path, opts)
	if err != nil {
		return nil, err
	}
	d.all = true
	// No other broker writes here, so leftover temporary files are ours.
	durable.RemoveTemps(d.env.FS, path)
	ents, err := d.env.FS.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("listing offsets directory: %w", err)
	}
	for _, ent := range ents {
		base, _, ok := slotlog.ParseGeneration(ent.Name())
		var n int
		if !ok || len(base) < 6 || base[:5] != "slot-" {
			continue
		}
		if n, err = strconv.Atoi(base[5:]); err != nil || d.slots[n] != nil {
			continue
		}
		file, err := slotlog.Latest(d.env.FS, path, base)
		if err != nil {
			d.Close()
			return nil, err
		}
		s, err := d.openSlot(n, file)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.slots[n] = s
	}
	return d, nil
}

// NewDir is the offsets directory with no slot open: a cluster broker
// claims each slot (Claim) while it owns it.
func NewDir(env durable.Env, path string, opts Options) (*Dir, error) {
	env = env.Or()
	if err := durable.MkdirAll(env.FS, path); err != nil {
		return nil, fmt.Errorf("creating offsets directory: %w", err)
	}
	return &Dir{path: path, env: env, opts: opts, slots: map[int]*Slot{}}, nil
}

// Claim takes slot n over for owner (generation ≥ 1): the slot's file is
// sealed against its previous owner (slotlog.Adopt) and recovered.
func (d *Dir) Claim(n int, owner slotlog.Owner) (*Slot, error) {
	if s := d.slots[n]; s != nil {
		return s, nil
	}
	file, err := slotlog.Adopt(d.env, d.path, fileBase(n), owner)
	if err != nil {
		return nil, fmt.Errorf("sealing offsets slot %d: %w", n, err)
	}
	s, err := d.openSlot(n, file)
	if err != nil {
		return nil, err
	}
	d.slots[n] = s
	return s, nil
}

// Release closes slot n (every append to it must be synced) and forgets
// it; it returns the failure the slot met, if any.
func (d *Dir) Release(n int) error {
	s := d.slots[n]
	if s == nil {
		return nil
	}
	delete(d.slots, n)
	var errs []error
	if err := s.Failed(); err != nil {
		errs = append(errs, fmt.Errorf("offsets slot %d: %w", n, err))
	}
	return errors.Join(append(errs, s.Close())...)
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

// Slot returns slot n's log, creating its file on first use (ErrNotOwned
// for a slot a cluster broker has not claimed).
func (d *Dir) Slot(n int) (*Slot, error) {
	if s := d.slots[n]; s != nil {
		return s, nil
	}
	if !d.all {
		return nil, ErrNotOwned
	}
	file, err := slotlog.Latest(d.env.FS, d.path, fileBase(n))
	if err != nil {
		return nil, err
	}
	s, err := d.openSlot(n, file)
	if err != nil {
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

// queuedEntry is an append waiting for its fsync before the view shows it.
type queuedEntry struct {
	e     *Entry
	first uint64
}

func (d *Dir) openSlot(n int, path string) (*Slot, error) {
	s := &Slot{Num: n, state: NewState(), view: newView(d.opts.Now), opts: d.opts, lg: d.env.Logger.With("offsets_slot", n)}
	var unnumbered []Record
	l, err := slotlog.Open(d.env, store, path, func(f slotlog.Frame) error {
		e, first, err := decodeEntry(f.Payload)
		if err != nil {
			return err
		}
		if err := s.state.Apply(&e, first); err != nil {
			// Apache skips records it cannot decode too.
			s.lg.Warn("skipping undecodable records in an offsets log", "file", path, "at", f.At, "err", err)
		}
		if first == 0 && e.Kind == KindPlain {
			// A snapshot written before group metadata kept its
			// sequence number: placed below, once the log is read.
			for _, r := range e.Records {
				unnumbered = append(unnumbered, Record{Key: append([]byte(nil), r.Key...), Value: append([]byte(nil), r.Value...)})
			}
			return nil
		}
		s.view.apply(&e, first)
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.Preallocate() // offset commits wait for its fsyncs
	s.log = l
	if err := s.numberRecords(unnumbered); err != nil {
		l.Close()
		return nil, err
	}
	s.compactAt = s.nextCompaction()
	if s.log.Size() > s.compactAt {
		if err := s.Compact(); err != nil {
			l.Close()
			return nil, err
		}
	}
	return s, nil
}

// numberRecords gives the records an old snapshot held without sequence
// numbers (and that nothing later replaced) a place of their own: they are
// appended again, durably, so the view shows them at offsets above
// everything a reader can have seen.
func (s *Slot) numberRecords(recs []Record) error {
	recs = s.view.missing(recs)
	if len(recs) == 0 {
		return nil
	}
	if _, err := s.Append(&Entry{Kind: KindPlain, Records: recs}); err != nil {
		return err
	}
	s.lg.Info("numbered records of an old snapshot", "records", len(recs))
	return s.Sync()
}

// State is the slot's replayed state, kept current by Append. The caller
// must not modify it.
func (s *Slot) State() *State { return s.state }

// Size is the log's length in bytes.
func (s *Slot) Size() int64 { return s.log.Size() }

// Log is the slot's file (the writer's group commit syncs it).
func (s *Slot) Log() *slotlog.Log { return s.log }

// Failed reports the write or fsync error that stopped the slot, if any.
func (s *Slot) Failed() error { return s.log.Failed() }

// Append writes e (not yet durable: Sync makes it so) and applies it to
// the state, returning the sequence number of its first record. A failed
// write is final for the slot.
func (s *Slot) Append(e *Entry) (uint64, error) {
	first := s.state.NextSeq
	if err := s.log.Append(encodeEntry(nil, e, first)); err != nil {
		return 0, err
	}
	if err := s.state.Apply(e, first); err != nil {
		s.lg.Warn("appended records the state cannot decode", "err", err)
	}
	s.undurable = append(s.undurable, queuedEntry{e, first})
	return first, nil
}

// Sync makes every appended entry durable. After a failed fsync the page
// cache may have dropped the data, so the slot stops taking writes.
func (s *Slot) Sync() error {
	if err := s.log.Sync(); err != nil {
		return err
	}
	s.Durable(s.state.NextSeq)
	return nil
}

// Durable tells the slot that an fsync covered every append up to the one
// numbered from first: the view shows them from now on. (The writer's
// group commit syncs the log off the actor and calls this as it answers.)
func (s *Slot) Durable(first uint64) {
	n := 0
	for n < len(s.undurable) && s.undurable[n].first <= first {
		q := s.undurable[n]
		s.view.apply(q.e, q.first)
		s.undurable[n] = queuedEntry{}
		n++
	}
	s.undurable = s.undurable[n:]
	if len(s.undurable) == 0 {
		s.undurable = nil
	}
	if n > 0 {
		s.view.clean(false)
	}
}

// View is the slot as the __consumer_offsets partition (view.go).
func (s *Slot) View() *View { return s.view }

// NeedsCompaction reports whether the log has grown past twice its live
// size (and the minimum).
func (s *Slot) NeedsCompaction() bool { return s.log.Failed() == nil && s.log.Size() > s.compactAt }

func (s *Slot) nextCompaction() int64 {
	live := int64(0)
	for _, e := range s.snapshot() {
		live += int64(len(slotlog.AppendFrame(nil, 0, encodeEntry(nil, &e.Entry, e.FirstSeq))))
	}
	if at := 2 * live; at > s.opts.compactMin() {
		return at
	}
	return s.opts.compactMin()
}

// Compact replaces the log with a snapshot of its state. Call it only
// when everything appended has been synced.
func (s *Slot) Compact() error {
	if len(s.undurable) > 0 {
		return fmt.Errorf("compacting offsets slot %d with %d appends not yet durable", s.Num, len(s.undurable))
	}
	before := s.log.Size()
	snap := s.snapshot()
	err := s.log.Rewrite(func(yield func([]byte) bool) {
		for _, e := range snap {
			if !yield(encodeEntry(nil, &e.Entry, e.FirstSeq)) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	s.compactAt = max(2*s.log.Size(), s.opts.compactMin())
	s.lg.Info("compacted offsets log", "file", s.log.Path(), "before_bytes", before, "after_bytes", s.log.Size())
	return nil
}

// snapshot is the slot's log compacted as Apache's cleaner would leave
// the topic — the latest record of each key, at its own sequence number
// (the view's snapshot, from which replay rebuilds the same state) — plus
// what the state needs beyond records: each producer's last epoch and the
// next sequence number.
func (s *Slot) snapshot() []SeqEntry {
	out := s.view.snapshot()
	for i := range out {
		if out[i].Kind == KindTxn {
			out[i].Epoch = s.state.Epochs[out[i].ProducerID]
		}
	}
	pids := make([]int64, 0, len(s.state.Epochs))
	for pid := range s.state.Epochs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		out = append(out, SeqEntry{Entry{Kind: KindProducerEpoch, ProducerID: pid, Epoch: s.state.Epochs[pid]}, 0})
	}
	if s.state.NextSeq > 0 {
		out = append(out, SeqEntry{Entry{Kind: KindSeqMark}, s.state.NextSeq - 1})
	}
	return out
}

// Close closes the file (appends are fsynced by the caller first) and
// wakes the view's readers.
func (s *Slot) Close() error {
	s.view.close()
	return s.log.Close()
}
