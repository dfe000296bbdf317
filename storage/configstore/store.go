// Package configstore persists the dynamic broker config layers under
// <data>/__cluster/configs/ (tmp + fsync + rename).
package configstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Store persists the two dynamic layers, one JSON object of name → value
// each: <data>/__cluster/configs/cluster-default.json (the "" resource)
// and broker-<id>.json (this broker's resource). Every write is durable
// (tmp + fsync + rename) before the change is answered.
type Store struct {
	env      durable.Env
	dir      string
	brokerID int32
}

// OpenStore uses <data>/__cluster/configs.
func OpenStore(env durable.Env, brokerID int32) (*Store, error) {
	env = env.Or()
	dir := filepath.Join(env.DataDir, "__cluster", "configs")
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return nil, err
	}
	durable.RemoveTemps(env.FS, dir)
	return &Store{env: env, dir: dir, brokerID: brokerID}, nil
}

func (s *Store) path(perBroker bool) string {
	if perBroker {
		return filepath.Join(s.dir, fmt.Sprintf("broker-%d.json", s.brokerID))
	}
	return filepath.Join(s.dir, "cluster-default.json")
}

// Load reads a dynamic layer; a missing file is an empty layer. One that
// does not parse is corruption: the start fails naming it, or with
// --skip-corrupt it is moved aside and the layer starts empty.
func (s *Store) Load(perBroker bool) (map[string]string, error) {
	path := s.path(perBroker)
	b, err := vfs.ReadFile(s.env.FS, path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	if err := json.Unmarshal(b, &values); err != nil {
		var off int64
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			off = syn.Offset
		}
		if err := s.env.Corrupt("broker configs", path, off, err.Error()); err != nil {
			return nil, err
		}
		return map[string]string{}, nil
	}
	return values, nil
}

// Save writes a dynamic layer.
func (s *Store) Save(perBroker bool, values map[string]string) error {
	b, err := json.MarshalIndent(values, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(s.env.FS, s.path(perBroker), b)
}
