package producers

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// SnapshotFile is the producer state snapshot's name in a partition
// directory.
const SnapshotFile = "producer-state.snapshot"

type snapshot struct {
	Version int              `json:"version"`
	Offset  int64            `json:"offset"` // state after applying every batch below this offset
	Entries map[string]Entry `json:"producers"`
}

// Snapshot encodes the state as of offset; the partition actor writes it
// to SnapshotFile durably.
func (s *State) Snapshot(offset int64) ([]byte, error) {
	snap := snapshot{Version: 1, Offset: offset, Entries: make(map[string]Entry, len(s.entries))}
	for pid, e := range s.entries {
		snap.Entries[strconv.FormatInt(pid, 10)] = *e
	}
	return json.Marshal(snap)
}

// Restore replaces the state's entries with a snapshot's (as Snapshot
// encoded it) and returns the offset it covers. A corrupt snapshot is an
// error (the caller replays the whole log instead).
func (s *State) Restore(b []byte) (int64, error) {
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return 0, fmt.Errorf("parsing the producer snapshot: %w", err)
	}
	if snap.Version != 1 {
		return 0, fmt.Errorf("unknown producer snapshot version %d", snap.Version)
	}
	entries := make(map[int64]*Entry, len(snap.Entries))
	for k, e := range snap.Entries {
		pid, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("producer snapshot: bad producer id %q", k)
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
