package configstore

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"sync"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// EntityStore persists configs keyed by entity, then by config name: the
// client quotas (<data>/__cluster/configs/client-quotas.json, entity →
// quota key → value) and the client-metrics subscriptions
// (client-metrics.json, subscription → config → value). The whole file is
// rewritten durably (tmp + fsync + rename) before Apply returns.
type EntityStore struct {
	env  durable.Env
	path string
	mu   sync.Mutex
	all  map[string]map[string]string // as on disk; nil until loaded
}

// Entities opens the entity store named name (a file name without
// extension) beside the broker config layers.
func (s *Store) Entities(name string) *EntityStore {
	return &EntityStore{env: s.env, path: filepath.Join(s.dir, name+".json")}
}

// Load reads every entity; a missing file is none. One that does not
// parse is corruption, as for the broker config layers. The revision is
// always 0 (etcd's store returns its revision).
func (e *EntityStore) Load() (map[string]map[string]string, int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.loadLocked(); err != nil {
		return nil, 0, err
	}
	return cloneEntities(e.all), 0, nil
}

func (e *EntityStore) loadLocked() error {
	if e.all != nil {
		return nil
	}
	b, err := vfs.ReadFile(e.env.FS, e.path)
	if errors.Is(err, fs.ErrNotExist) {
		e.all = map[string]map[string]string{}
		return nil
	}
	if err != nil {
		return err
	}
	all := map[string]map[string]string{}
	if err := json.Unmarshal(b, &all); err != nil {
		var off int64
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			off = syn.Offset
		}
		if err := e.env.Corrupt("entity configs", e.path, off, err.Error()); err != nil {
			return err
		}
		all = map[string]map[string]string{}
	}
	e.all = all
	return nil
}

// Apply sets and removes configs of one entity (an entity left with
// none is gone) and persists the result.
func (e *EntityStore) Apply(entity string, set map[string]string, remove []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.loadLocked(); err != nil {
		return err
	}
	next := cloneEntities(e.all)
	values := maps.Clone(next[entity])
	if values == nil {
		values = map[string]string{}
	}
	for _, k := range remove {
		delete(values, k)
	}
	maps.Copy(values, set)
	if len(values) == 0 {
		delete(next, entity)
	} else {
		next[entity] = values
	}
	return e.writeLocked(next)
}

// writeLocked persists next as the whole store (tmp + fsync + rename)
// and makes it the loaded state.
func (e *EntityStore) writeLocked(next map[string]map[string]string) error {
	b, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(e.env.FS, e.path, b); err != nil {
		return err
	}
	e.all = next
	return nil
}

// ApplyIfUnchanged sets configs of several entities and persists them in
// one write. The file has one writer, this broker, which serialises its
// changes itself: rev (always 0 here) is never stale, and the answer is
// always true unless the write fails. It matches etcd's store
// (coord.EntityStore), where two brokers may race.
func (e *EntityStore) ApplyIfUnchanged(set map[string]map[string]string, _ int64) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.loadLocked(); err != nil {
		return false, err
	}
	next := cloneEntities(e.all)
	for entity, values := range set {
		merged := maps.Clone(next[entity])
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, values)
		next[entity] = merged
	}
	if err := e.writeLocked(next); err != nil {
		return false, err
	}
	return true, nil
}

func cloneEntities(m map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(m))
	for k, v := range m {
		out[k] = maps.Clone(v)
	}
	return out
}
