// Package pids allocates producer ids that are never reused, across
// restarts and across brokers sharing a data volume (R-IPI-4):
// pid = (brokerID+1) << 40 + n, with n handed out from blocks whose end is
// persisted (tmp + fsync + rename) before any id in the block is used.
package pids

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"kaas/storage/durable"
)

// BlockSize is how many ids one persisted block covers (Apache's
// controller hands out blocks of 1000 too).
const BlockSize = 1000

// Allocator hands out producer ids for one broker. Safe for concurrent use.
type Allocator struct {
	mu       sync.Mutex
	path     string
	base     int64
	next     int64 // next n to hand out
	blockEnd int64 // first n not covered by the persisted block
}

type state struct {
	BrokerID int32 `json:"broker_id"`
	BlockEnd int64 `json:"block_end"`
}

// Open loads <data>/__cluster/producer_ids/broker-<id>.json. Ids resume
// after the last persisted block: ids of a block only partly used before a
// restart are skipped, never reissued.
func Open(dataDir string, brokerID int32) (*Allocator, error) {
	if brokerID < 0 {
		return nil, fmt.Errorf("broker id %d: must be >= 0", brokerID)
	}
	dir := filepath.Join(dataDir, "__cluster", "producer_ids")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	a := &Allocator{path: filepath.Join(dir, fmt.Sprintf("broker-%d.json", brokerID)), base: int64(brokerID+1) << 40}
	b, err := os.ReadFile(a.path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, err
	default:
		var s state
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", a.path, err)
		}
		a.next, a.blockEnd = s.BlockEnd, s.BlockEnd
	}
	return a, nil
}

// Next returns a fresh producer id.
func (a *Allocator) Next() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.blockEnd {
		end := a.next + BlockSize
		if end >= 1<<40 {
			return -1, fmt.Errorf("producer id space of this broker is exhausted")
		}
		b, _ := json.Marshal(state{BrokerID: int32(a.base>>40) - 1, BlockEnd: end})
		if err := durable.WriteFile(a.path, b); err != nil {
			return -1, fmt.Errorf("persisting producer id block: %w", err)
		}
		a.blockEnd = end
	}
	id := a.base + a.next
	a.next++
	return id, nil
}
