package txnlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"kaas/storage/slots"
)

// Store is the transaction coordinator's durable state for every slot this
// broker owns. Put and Delete block until the record is fsynced. Safe for
// concurrent use; each transactional id is written by its own actor.
type Store struct {
	dir   string
	slots [slots.Count]*slotLog
}

// Open loads every slot, takes ownership (the slot's coordinator epoch
// goes up by one and is persisted: markers written from now on carry it,
// R-MRK-3) and returns the store.
func Open(dataDir string) (*Store, error) {
	dir := filepath.Join(dataDir, "__cluster", "txn_state")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	st := &Store{dir: dir}
	for i := range st.slots {
		s, err := openSlot(filepath.Join(dir, fmt.Sprintf("slot-%02d.log", i)))
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("loading transaction slot %d: %w", i, err)
		}
		st.slots[i] = s
		if err := s.append(record{Op: "epoch", CoordinatorEpoch: s.epoch + 1}); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

func (st *Store) slot(id string) *slotLog { return st.slots[slots.Of(id)] }

// Get returns the persisted entry for id.
func (st *Store) Get(id string) (Entry, bool) {
	s := st.slot(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if ok {
		e = e.Clone()
	}
	return e, ok
}

// Put persists an entry (one appended, fsynced record).
func (st *Store) Put(e Entry) error {
	s := st.slot(e.TransactionalID)
	e = e.Clone()
	if err := s.append(record{Op: "put", Entry: &e}); err != nil {
		return err
	}
	return s.compactIfLarge()
}

// Delete removes an entry (expiry).
func (st *Store) Delete(id string) error {
	s := st.slot(id)
	if err := s.append(record{Op: "del", ID: id}); err != nil {
		return err
	}
	return s.compactIfLarge()
}

// CoordinatorEpoch is the slot's ownership epoch for id.
func (st *Store) CoordinatorEpoch(id string) int32 {
	s := st.slot(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// MaxCoordinatorEpoch is the highest ownership epoch of any slot: no
// marker this broker's coordinator wrote carries a higher one.
func (st *Store) MaxCoordinatorEpoch() int32 {
	epoch := int32(-1)
	for _, s := range st.slots {
		s.mu.Lock()
		epoch = max(epoch, s.epoch)
		s.mu.Unlock()
	}
	return epoch
}

// All returns every entry, sorted by transactional id.
func (st *Store) All() []Entry {
	var out []Entry
	for _, s := range st.slots {
		s.mu.Lock()
		for _, e := range s.entries {
			out = append(out, e.Clone())
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out
}

// Close closes the slot files.
func (st *Store) Close() error {
	var first error
	for _, s := range st.slots {
		if s != nil {
			if err := s.close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Persist is Put for the coordinator's actors, which continue when done
// is called. For now it completes before it returns.
func (st *Store) Persist(e Entry, done func(error)) { done(st.Put(e)) }

// Remove is Delete for the coordinator's actors, as Persist.
func (st *Store) Remove(id string, done func(error)) { done(st.Delete(id)) }
