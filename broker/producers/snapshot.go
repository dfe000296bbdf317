package producers

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"kaas/broker/durable"
)

// SnapshotFile is the producer state snapshot's name in a partition
// directory.
const SnapshotFile = "producer-state.snapshot"

type snapshot struct {
	Version int              `json:"version"`
	Offset  int64            `json:"offset"` // state after applying every batch below this offset
	Entries map[string]Entry `json:"producers"`
}

// Save writes the state as of offset (tmp + fsync + rename).
func (s *State) Save(path string, offset int64) error {
	snap := snapshot{Version: 1, Offset: offset, Entries: make(map[string]Entry, len(s.entries))}
	for pid, e := range s.entries {
		snap.Entries[strconv.FormatInt(pid, 10)] = *e
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	return durable.WriteFile(path, b)
}

// Load replaces the state's entries with a snapshot's and returns the
// offset it covers. A missing file is offset 0 with no entries; a corrupt
// one is an error (the caller replays the whole log instead).
func (s *State) Load(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	if snap.Version != 1 {
		return 0, fmt.Errorf("%s: unknown snapshot version %d", path, snap.Version)
	}
	entries := make(map[int64]*Entry, len(snap.Entries))
	for k, e := range snap.Entries {
		pid, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: bad producer id %q", path, k)
		}
		e := e
		entries[pid] = &e
	}
	s.Reset()
	for pid, e := range entries {
		s.put(pid, e)
	}
	return snap.Offset, nil
}

// Reset drops every entry (before a full replay).
func (s *State) Reset() {
	for pid := range s.entries {
		s.drop(pid)
	}
}
