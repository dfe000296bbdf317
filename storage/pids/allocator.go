// Package pids allocates producer ids that are never reused, across
// restarts and across brokers sharing a data volume (R-IPI-4):
// pid = (brokerID+1) << 40 + n, with n handed out from blocks whose end is
// persisted (tmp + fsync + rename) before any id in the block is used.
package pids

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"kaas/storage/diskcheck"
	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// BlockSize is how many ids one persisted block covers (Apache's
// controller hands out blocks of 1000 too).
const BlockSize = 1000

// Allocator hands out producer ids for one broker. Safe for concurrent use.
type Allocator struct {
	mu       sync.Mutex
	env      durable.Env
	path     string
	base     int64
	next     int64 // next n to hand out
	blockEnd int64 // first n not covered by the persisted block
	// failed latches a failed block write: whether the new block end
	// reached the disk is unknown, so no id is handed out until a restart
	// reads what did.
	failed error
}

type state struct {
	BrokerID int32 `json:"broker_id"`
	BlockEnd int64 `json:"block_end"`
}

// Open loads <data>/__cluster/producer_ids/broker-<id>.json. Ids resume
// after the last persisted block: ids of a block only partly used before a
// restart are skipped, never reissued. A file that does not parse stops
// the start even with --skip-corrupt: without the block end, ids could be
// reissued.
func Open(env durable.Env, brokerID int32) (*Allocator, error) {
	env = env.Or()
	if brokerID < 0 {
		return nil, fmt.Errorf("broker id %d: must be >= 0", brokerID)
	}
	dir := filepath.Join(env.DataDir, "__cluster", "producer_ids")
	if err := durable.MkdirAll(env.FS, dir); err != nil {
		return nil, err
	}
	durable.RemoveTemps(env.FS, dir)
	a := &Allocator{env: env, path: filepath.Join(dir, fmt.Sprintf("broker-%d.json", brokerID)), base: int64(brokerID+1) << 40}
	b, err := vfs.ReadFile(env.FS, a.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var s state
		if err := json.Unmarshal(b, &s); err != nil || s.BlockEnd < 0 {
			return nil, &durable.CorruptError{Path: a.path, Offset: 0, Reason: fmt.Sprintf(
				"the producer id block does not parse (%v); it cannot be skipped, or producer ids would be reused: write {\"block_end\": N} with N above every id this broker handed out", err)}
		}
		a.next, a.blockEnd = s.BlockEnd, s.BlockEnd
	}
	return a, nil
}

// Next returns a fresh producer id.
func (a *Allocator) Next() (int64, error) {
	// Every 1,000th call persists a block with the lock held: any call
	// may wait on the disk.
	diskcheck.Blocking("the producer id allocator, its lock held while it persists a block:", a.path)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return -1, a.failed
	}
	if a.next >= a.blockEnd {
		end := a.next + BlockSize
		if end >= 1<<40 {
			return -1, fmt.Errorf("producer id space of this broker is exhausted")
		}
		b, _ := json.Marshal(state{BrokerID: int32(a.base>>40) - 1, BlockEnd: end})
		if err := durable.WriteFile(a.env.FS, a.path, b); err != nil {
			a.failed = fmt.Errorf("persisting producer id block: %w", err)
			a.env.Failed("producer id allocator", err)
			return -1, a.failed
		}
		a.blockEnd = end
	}
	id := a.base + a.next
	a.next++
	return id, nil
}
