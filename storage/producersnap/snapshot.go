// Package producersnap is the producer state snapshot's format: one file
// per partition directory with every producer id's state as of an
// offset (R-PV-15). It is derived data: a missing, corrupt or unknown
// snapshot means a replay of the log, never a refused start. The state
// itself is state/producers'; actors/partition converts between the two
// and writes the file durably.
package producersnap

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// FileName is the producer state snapshot's name in a partition
// directory.
const FileName = "producer-state.snapshot"

// Batch is one batch of a producer's window of the last five.
type Batch struct {
	FirstSeq    int32 `json:"first_seq"`
	LastSeq     int32 `json:"last_seq"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
	Timestamp   int64 `json:"timestamp"`
}

// Producer is one producer id's state.
type Producer struct {
	Epoch            int16   `json:"epoch"`
	Window           []Batch `json:"window,omitempty"`
	CoordinatorEpoch int32   `json:"coordinator_epoch"`
	LastTimestamp    int64   `json:"last_timestamp"`
	TxnFirstOffset   int64   `json:"txn_first_offset"`
}

type snapshot struct {
	Version int                 `json:"version"`
	Offset  int64               `json:"offset"` // state after applying every batch below this offset
	Entries map[string]Producer `json:"producers"`
}

// Encode is the snapshot of producers as of offset.
func Encode(offset int64, producers map[int64]Producer) ([]byte, error) {
	snap := snapshot{Version: 1, Offset: offset, Entries: make(map[string]Producer, len(producers))}
	for pid, e := range producers {
		snap.Entries[strconv.FormatInt(pid, 10)] = e
	}
	return json.Marshal(snap)
}

// Decode reads a snapshot Encode wrote: the producers and the offset it
// covers. A corrupt snapshot is an error (the caller replays the whole
// log instead).
func Decode(b []byte) (int64, map[int64]Producer, error) {
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return 0, nil, fmt.Errorf("parsing the producer snapshot: %w", err)
	}
	if snap.Version != 1 {
		return 0, nil, fmt.Errorf("unknown producer snapshot version %d", snap.Version)
	}
	out := make(map[int64]Producer, len(snap.Entries))
	for k, e := range snap.Entries {
		pid, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("producer snapshot: bad producer id %q", k)
		}
		out[pid] = e
	}
	return snap.Offset, out, nil
}
