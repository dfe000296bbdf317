// Package txnlog persists transaction coordinator entries
// (model/txnstate): one append-only log per coordinator slot under
// <data>/__cluster/txn_state/, compacted when it grows well past its live
// entries. Every transition is one appended record, fsynced with group
// commit across the slot's writers, so a commit costs an append and a
// shared fsync, never a slot rewrite.
package txnlog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"kaas/model/slots"
	"kaas/model/txnstate"
	"kaas/storage/durable"
	"kaas/storage/slotlog"
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
	entries map[string]txnstate.Entry
	sizes   map[string]int // each entry's last put record, for compaction
	live    int64
	epoch   int32
	scratch []byte // the record being appended, reused: Append copies it
}

// ErrNotOwned refuses a write to a slot this broker has not opened (in a
// cluster, a slot another broker owns).
var ErrNotOwned = errors.New("transaction slot not owned by this broker")

// NewStore is the store with no slot open: a cluster broker opens each
// slot (OpenSlot) while it owns it.
func NewStore(env durable.Env) (*Store, error) {
	env = env.Or()
	dir := filepath.Join(env.DataDir, "__cluster", "txn_state")
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return nil, err
	}
	return &Store{env: env, dir: dir}, nil
}

// Open loads every slot, takes ownership (each slot's coordinator epoch
// goes up by one and is persisted: markers written from now on carry it,
// R-MRK-3) and returns the store: a single broker owns every slot. Damage
// follows storage/slotlog's corruption policy; files in the earlier line
// format are converted.
func Open(env durable.Env) (*Store, error) {
	st, err := NewStore(env)
	if err != nil {
		return nil, err
	}
	// No other broker writes here, so leftover temporary files are ours.
	durable.RemoveTemps(st.env.FS, st.dir)
	for i := range st.slots {
		if err := st.OpenSlot(i, slotlog.Owner{}); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// OpenSlot loads slot n and takes it over: its coordinator epoch goes up
// by one and is persisted before anything else is written. gen 0 opens the
// slot's newest file in place (a single broker); gen ≥ 1 (a cluster
// owner's epoch + 1) first seals it for this owner (slotlog.Adopt), so a
// deposed owner's late writes are never read. Only the store's writer may
// call it once the writer runs.
func (st *Store) OpenSlot(n int, owner slotlog.Owner) error {
	if st.slots[n] != nil {
		return nil
	}
	s, err := st.openSlot(n, owner)
	if err != nil {
		return fmt.Errorf("loading transaction slot %d: %w", n, err)
	}
	next := s.epoch + 1
	if s.log.Salvaged() {
		next = s.epoch + salvageEpochGap
	}
	err = s.append(record{Op: "epoch", CoordinatorEpoch: next})
	if err == nil {
		err = s.log.Sync()
	}
	if err != nil {
		s.log.Close()
		return fmt.Errorf("taking transaction slot %d over: %w", n, err)
	}
	st.slots[n] = s
	st.view.setSlot(n, s.epoch, s.entries)
	return nil
}

// CloseSlot closes slot n (everything appended to it must be synced) and
// drops its entries from the view. It returns the failure the slot met, if
// any (a write or fsync that took it offline).
func (st *Store) CloseSlot(n int) error {
	s := st.slots[n]
	if s == nil {
		return nil
	}
	st.slots[n] = nil
	st.view.slots[n].Store(nil)
	var errs []error
	if err := s.log.Failed(); err != nil {
		errs = append(errs, fmt.Errorf("transaction slot %d: %w", n, err))
	}
	return errors.Join(append(errs, s.log.Close())...)
}

// Owns reports whether slot n is open here.
func (st *Store) Owns(n int) bool { return st.slots[n] != nil }

func (st *Store) openSlot(n int, owner slotlog.Owner) (*Slot, error) {
	base := fmt.Sprintf("slot-%02d", n)
	var path string
	var err error
	if owner.Gen > 0 {
		path, err = slotlog.Adopt(st.env, st.dir, base, owner)
	} else {
		path, err = slotlog.Latest(st.env.FS, st.dir, base)
	}
	if err != nil {
		return nil, err
	}
	data, err := vfs.ReadFile(st.env.FS, path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if isLegacy(data) {
		if err := convertLegacy(st.env, path, data); err != nil {
			return nil, err
		}
	}
	s := &Slot{Num: n, entries: map[string]txnstate.Entry{}, sizes: map[string]int{}}
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
	s.log.Preallocate() // every transaction fsyncs its slot twice
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
	b := appendRecord(s.scratch[:0], r)
	s.scratch = b[:0] // Append copies it into its frame
	if err := s.log.Append(b); err != nil {
		return err
	}
	s.apply(r, len(b))
	return nil
}

// Log is the slot's file (the writer's group commit syncs it).
func (s *Slot) Log() *slotlog.Log { return s.log }

// Slot is the slot transactional id id hashes onto (R-CRD-1), or nil when
// it is not open here.
func (st *Store) Slot(id string) *Slot { return st.slots[slots.Of(id)] }

// Slots lists the open slots.
func (st *Store) Slots() []*Slot {
	out := make([]*Slot, 0, len(st.slots))
	for _, s := range st.slots {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Append writes e as id's entry; it is durable once its slot's log is
// synced, and readers see it once Published.
func (st *Store) Append(e txnstate.Entry) error {
	s := st.Slot(e.TransactionalID)
	if s == nil {
		return ErrNotOwned
	}
	return s.append(record{Op: "put", Entry: &e})
}

// AppendDelete writes the removal of id's entry (expiry).
func (st *Store) AppendDelete(id string) error {
	s := st.Slot(id)
	if s == nil {
		return ErrNotOwned
	}
	return s.append(record{Op: "del", ID: id})
}

// Published makes e what readers see for its id: call it once the
// record is durable.
func (st *Store) Published(e txnstate.Entry) { st.view.put(e) }

// PublishedDelete makes id's entry gone for readers, once durable.
func (st *Store) PublishedDelete(id string) { st.view.remove(id) }

// Put appends e, fsyncs and publishes it: the synchronous path, for a
// single goroutine with no writer running (tests and tools seeding state).
func (st *Store) Put(e txnstate.Entry) error {
	if err := st.Append(e); err != nil {
		return err
	}
	if err := st.Slot(e.TransactionalID).log.Sync(); err != nil { // open: Append succeeded
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
func (st *Store) Get(id string) (txnstate.Entry, bool) { return st.view.Get(id) }

// All returns every durable entry, sorted (View.All).
func (st *Store) All() []txnstate.Entry { return st.view.All() }

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
