// Package configstore persists the dynamic broker config layers under
// <data>/__cluster/configs/ (tmp + fsync + rename).
package configstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"kaas/storage/durable"
)

// Store persists the two dynamic layers, one JSON object of name → value
// each: <data>/__cluster/configs/cluster-default.json (the "" resource)
// and broker-<id>.json (this broker's resource). Every write is durable
// (tmp + fsync + rename) before the change is answered.
type Store struct {
	dir      string
	brokerID int32
}

// OpenStore uses <data>/__cluster/configs.
func OpenStore(dataDir string, brokerID int32) (*Store, error) {
	dir := filepath.Join(dataDir, "__cluster", "configs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	return &Store{dir: dir, brokerID: brokerID}, nil
}

func (s *Store) path(perBroker bool) string {
	if perBroker {
		return filepath.Join(s.dir, fmt.Sprintf("broker-%d.json", s.brokerID))
	}
	return filepath.Join(s.dir, "cluster-default.json")
}

// Load reads a dynamic layer; a missing file is an empty layer.
func (s *Store) Load(perBroker bool) (map[string]string, error) {
	b, err := os.ReadFile(s.path(perBroker))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	if err := json.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", s.path(perBroker), err)
	}
	return values, nil
}

// Save writes a dynamic layer.
func (s *Store) Save(perBroker bool, values map[string]string) error {
	b, err := json.MarshalIndent(values, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(s.path(perBroker), b)
}
