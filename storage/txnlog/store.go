package txnlog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"kaas/storage/durable"
	"kaas/storage/slotlog"
	"kaas/storage/slots"
	"kaas/storage/vfs"
)

// store names the transaction slot logs in logs and metrics.
const store = "transaction log"

// salvageEpochGap is how far a slot's coordinator epoch jumps when its
// file was salvaged (--skip-corrupt): a lost record may have carried a
// higher epoch than any intact one, and an epoch must never be reused
// (R-MRK-3).
const salvageEpochGap = 1000

// compactMinBytes: a slot log smaller than this is never compacted.
const compactMinBytes = 1 << 20

// Store is the transaction coordinator's durable state for every slot this
// broker owns: one storage/slotlog log per slot under
// <data>/__cluster/txn_state/. It has one writer at a time (the
// transaction state writer actor, or a test or tool seeding entries
// before it starts); readers use View, which never blocks.
type Store struct {
	env   durable.Env
	dir   string
	slots [slots.Count]*Slot
	view  View
}

// Slot is one coordinator slot: its log and its replayed entries.
type Slot struct {
	Num     int
	log     *slotlog.Log
	entries map[string]Entry
	sizes   map[string]int // each entry's last put record, for compaction
	live    int64
	epoch   int32
}

// Open loads every slot, takes ownership (each slot's coordinator epoch
// goes up by one and is persisted: markers written from now on carry it,
// R-MRK-3) and returns the store. Damage follows storage/slotlog's
// corruption policy; files in the earlier line format are converted.
func Open(env durable.Env) (*Store, error) {
	env = env.Or()
	dir := filepath.Join(env.DataDir, "__cluster", "txn_state")
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return nil, err
	}
	durable.RemoveTemps(env.FS, dir)
	st := &Store{env: env, dir: dir}
	for i := range st.slots {
		s, err := st.openSlot(i)
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("loading transaction slot %d: %w", i, err)
		}
		st.slots[i] = s
		next := s.epoch + 1
		if s.log.Salvaged() {
			next = s.epoch + salvageEpochGap
		}
		if err := s.append(record{Op: "epoch", CoordinatorEpoch: next}); err != nil {
			st.Close()
			return nil, err
		}
	}
	for i, s := range st.slots {
		if err := s.log.Sync(); err != nil {
			st.Close()
			return nil, err
		}
		st.view.setSlot(i, s.epoch, s.entries)
	}
	return st, nil
}

func (st *Store) openSlot(n int) (*Slot, error) {
	path := filepath.Join(st.dir, fmt.Sprintf("slot-%02d.log", n))
	data, err := vfs.ReadFile(st.env.FS, path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if isLegacy(data) {
		if err := convertLegacy(st.env, path, data); err != nil {
			return nil, err
		}
	}
	s := &Slot{Num: n, entries: map[string]Entry{}, sizes: map[string]int{}}
	s.log, err = slotlog.Open(st.env, store, path, func(f slotlog.Frame) error {
		r, err := decodeRecord(f.Payload)
		if err != nil {
			return err
		}
		s.apply(r, len(f.Payload))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Slot) apply(r record, size int) {
	if r.CoordinatorEpoch > s.epoch {
		s.epoch = r.CoordinatorEpoch
	}
	switch r.Op {
	case "put":
		id := r.Entry.TransactionalID
		s.live += int64(size - s.sizes[id])
		s.sizes[id] = size
		s.entries[id] = *r.Entry
	case "del":
		s.live -= int64(s.sizes[r.ID])
		delete(s.sizes, r.ID)
		delete(s.entries, r.ID)
	}
}

// append writes r (durable once the log is synced) and applies it.
func (s *Slot) append(r record) error {
	if r.CoordinatorEpoch == 0 {
		r.CoordinatorEpoch = s.epoch
	}
	b := encodeRecord(r)
	if err := s.log.Append(b); err != nil {
		return err
	}
	s.apply(r, len(b))
	return nil
}

// Log is the slot's file (the writer's group commit syncs it).
func (s *Slot) Log() *slotlog.Log { return s.log }

// Slot is the slot transactional id id hashes onto (R-CRD-1).
func (st *Store) Slot(id string) *Slot { return st.slots[slots.Of(id)] }

// Slots lists every slot.
func (st *Store) Slots() []*Slot { return st.slots[:] }

// Append writes e as id's entry; it is durable once its slot's log is
// synced, and readers see it once Published.
func (st *Store) Append(e Entry) error {
	return st.Slot(e.TransactionalID).append(record{Op: "put", Entry: &e})
}

// AppendDelete writes the removal of id's entry (expiry).
func (st *Store) AppendDelete(id string) error {
	return st.Slot(id).append(record{Op: "del", ID: id})
}

// Published makes e what readers see for its id: call it once the
// record is durable.
func (st *Store) Published(e Entry) { st.view.put(e) }

// PublishedDelete makes id's entry gone for readers, once durable.
func (st *Store) PublishedDelete(id string) { st.view.remove(id) }

// Put appends e, fsyncs and publishes it: the synchronous path, for a
// single goroutine with no writer running (tests and tools seeding state).
func (st *Store) Put(e Entry) error {
	if err := st.Append(e); err != nil {
		return err
	}
	if err := st.Slot(e.TransactionalID).log.Sync(); err != nil {
		return err
	}
	st.Published(e)
	return nil
}

// Delete is Put for a removal.
func (st *Store) Delete(id string) error {
	if err := st.AppendDelete(id); err != nil {
		return err
	}
	if err := st.Slot(id).log.Sync(); err != nil {
		return err
	}
	st.PublishedDelete(id)
	return nil
}

// NeedsCompaction reports whether the slot's log has grown past twice
// its live records (and the minimum).
func (s *Slot) NeedsCompaction() bool {
	return s.log.Failed() == nil && s.log.Size() > max(compactMinBytes, 2*s.live)
}

// Compact rewrites the slot's log with its live entries and epoch. Call it
// only when everything appended is synced.
func (s *Slot) Compact() error {
	recs := make([]record, 0, len(s.entries)+1)
	recs = append(recs, record{Op: "epoch", CoordinatorEpoch: s.epoch})
	for id := range s.entries {
		e := s.entries[id]
		recs = append(recs, record{Op: "put", Entry: &e, CoordinatorEpoch: s.epoch})
	}
	return s.log.Rewrite(func(yield func([]byte) bool) {
		for _, r := range recs {
			if !yield(encodeRecord(r)) {
				return
			}
		}
	})
}

// View is the lock-free read side.
func (st *Store) View() *View { return &st.view }

// Get returns id's durable entry (View.Get).
func (st *Store) Get(id string) (Entry, bool) { return st.view.Get(id) }

// All returns every durable entry, sorted (View.All).
func (st *Store) All() []Entry { return st.view.All() }

// CoordinatorEpoch is id's slot's ownership epoch (View.CoordinatorEpoch).
func (st *Store) CoordinatorEpoch(id string) int32 { return st.view.CoordinatorEpoch(id) }

// MaxCoordinatorEpoch is View.MaxCoordinatorEpoch.
func (st *Store) MaxCoordinatorEpoch() int32 { return st.view.MaxCoordinatorEpoch() }

// Close closes the slot files, returning the first failure any slot met
// (a write or fsync that took it offline): not everything written to it
// is durable.
func (st *Store) Close() error {
	var errs []error
	for _, s := range st.slots {
		if s == nil {
			continue
		}
		if err := s.log.Failed(); err != nil {
			errs = append(errs, fmt.Errorf("transaction slot %d: %w", s.Num, err))
		}
		errs = append(errs, s.log.Close())
	}
	return errors.Join(errs...)
}
