// Package topicstore persists topic metadata (name, id, partition count,
// config overrides): one JSON file per topic under <data>/__cluster/topics/.
package topicstore

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"kaas/storage/durable"
)

// Topic is one topic's persisted metadata.
type Topic struct {
	Name       string            `json:"name"`
	ID         UUID              `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// UUID is a topic id (Kafka's 16-byte UUID).
type UUID [16]byte

// NewUUID returns a random v4 UUID that is not Kafka's reserved zero or
// metadata ids.
func NewUUID() UUID {
	for {
		var u UUID
		_, _ = rand.Read(u[:])
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		if u != (UUID{}) && u != (UUID{15: 1}) {
			return u
		}
	}
}

func (u UUID) String() string { return hex.EncodeToString(u[:]) }

// MarshalText keeps ids readable in the JSON files.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText parses the hex form.
func (u *UUID) UnmarshalText(b []byte) error {
	raw, err := hex.DecodeString(string(b))
	if err != nil || len(raw) != 16 {
		return fmt.Errorf("bad topic id %q", b)
	}
	copy(u[:], raw)
	return nil
}

// Store persists topic metadata files.
type Store struct{ dir string }

// OpenStore uses <data>/__cluster/topics.
func OpenStore(dataDir string) (*Store, error) {
	dir := filepath.Join(dataDir, "__cluster", "topics")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name+".json") }

// Save writes a topic's file durably.
func (s *Store) Save(t Topic) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(s.path(t.Name), b)
}

// Delete removes a topic's file.
func (s *Store) Delete(name string) error {
	if err := os.Remove(s.path(name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return durable.SyncDir(s.dir)
}

// Load reads every topic file.
func (s *Store) Load() ([]Topic, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []Topic
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var t Topic
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", e.Name(), err)
		}
		out = append(out, t)
	}
	return out, nil
}
