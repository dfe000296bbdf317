// Package topicstore persists topic metadata (name, id, partition count,
// config overrides): one JSON file per topic under <data>/__cluster/topics/.
package topicstore

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"kaas/storage/durable"
	"kaas/storage/vfs"
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
type Store struct {
	env durable.Env
	dir string
}

// OpenStore uses <data>/__cluster/topics.
func OpenStore(env durable.Env) (*Store, error) {
	env = env.Or()
	dir := filepath.Join(env.DataDir, "__cluster", "topics")
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return nil, err
	}
	durable.RemoveTemps(env.FS, dir)
	return &Store{env: env, dir: dir}, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name+".json") }

// Save writes a topic's file durably.
func (s *Store) Save(t Topic) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(s.env.FS, s.path(t.Name), b)
}

// Delete removes a topic's file.
func (s *Store) Delete(name string) error {
	if err := s.env.FS.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return durable.SyncDir(s.env.FS, s.dir)
}

// Load reads every topic file. One that does not parse is corruption
// (files are replaced atomically, so a crash never tears one): the start
// fails naming it, or with --skip-corrupt it is moved aside and that topic
// is not served (its partition directories stay where they are).
func (s *Store) Load() ([]Topic, error) {
	entries, err := s.env.FS.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var out []Topic
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		b, err := vfs.ReadFile(s.env.FS, path)
		if err != nil {
			return nil, err
		}
		var t Topic
		if err := json.Unmarshal(b, &t); err != nil || t.Name+".json" != e.Name() || t.Partitions <= 0 {
			if err == nil {
				err = fmt.Errorf("names topic %q with %d partitions", t.Name, t.Partitions)
			}
			if err := s.env.Corrupt("topic metadata", path, jsonOffset(err), err.Error()); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// jsonOffset is where a JSON decoding error was found, or 0.
func jsonOffset(err error) int64 {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return syn.Offset
	}
	return 0
}
