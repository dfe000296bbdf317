package slotlog

import (
	"sync"
	"sync/atomic"
	"time"
)

// Group is group commit over several logs, for the one actor that owns
// them: each append registers what to do once it is durable, and Flush
// fsyncs every log written since the last flush once, then answers every
// waiting append with its own log's outcome (nil, or the failure that took
// that log offline). Appends that arrive while a flush runs wait in the
// actor's mailbox and are covered by the next one.
type Group struct {
	dirty   map[*Log]struct{}
	waiting []waiter
}

type waiter struct {
	log  *Log
	done func(error)
}

// Wait registers done for an append to l that succeeded.
func (g *Group) Wait(l *Log, done func(error)) {
	if g.dirty == nil {
		g.dirty = map[*Log]struct{}{}
	}
	g.dirty[l] = struct{}{}
	g.waiting = append(g.waiting, waiter{l, done})
}

// Pending is how many appends wait for the next Flush.
func (g *Group) Pending() int { return len(g.waiting) }

// Flush is one group-commit round: unless no append waits, it fsyncs the
// dirty logs and answers the waiting appends, then tells synced (if not
// nil) how long the round took and how many appends it answered. It
// reports whether a round ran (the caller may then compact: everything
// appended is durable).
func (g *Group) Flush(synced func(d time.Duration, appends int)) bool {
	n := len(g.waiting)
	if n == 0 {
		return false
	}
	start := time.Now()
	logs := make([]*Log, 0, len(g.dirty))
	for l := range g.dirty {
		logs = append(logs, l)
	}
	syncAll(logs)
	for _, w := range g.waiting {
		w.done(w.log.Failed())
	}
	clear(g.dirty)
	g.waiting = g.waiting[:0]
	if synced != nil {
		synced(time.Since(start), n)
	}
	return true
}

// parallelSyncs is how many of a round's fsyncs run at once. Each slot is
// its own file, so a round over many slots (32 transactional ids or
// groups committing at once) is as many fsyncs; run one after another
// they cost one device flush each, while concurrent fdatasyncs share the
// file system's journal commits: 32 appended files took 37 ms in turn and
// 7.6 ms eight at a time on this machine's ext4.
const parallelSyncs = 8

// syncAll fsyncs logs, up to parallelSyncs at once, and reports which
// succeeded. Each log is synced by one goroutine, and the caller reads
// them only after all are done.
func syncAll(logs []*Log) []bool {
	ok := make([]bool, len(logs))
	if len(logs) == 1 {
		ok[0] = logs[0].Sync() == nil
		return ok
	}
	var next atomic.Int32
	var wg sync.WaitGroup
	for range min(len(logs), parallelSyncs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(logs); i = int(next.Add(1)) - 1 {
				ok[i] = logs[i].Sync() == nil
			}
		}()
	}
	wg.Wait()
	return ok
}
