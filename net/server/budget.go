package server

import "sync"

// budget is the broker-wide bound on request bytes held in memory
// (Apache's queued.max.request.bytes): every frame reserves its size when
// its 4-byte prefix has been read — before any of its bytes are buffered,
// as Apache's memory pool does — and gives it back when the request is
// answered or its connection closes. Partial frames count, so connections
// that each hold most of a large frame cannot add up past the bound.
//
// As Apache's (non-strict) pool, a reservation succeeds while anything is
// left, so one frame larger than what remains still gets in and in-use
// can exceed the limit by at most one frame; a frame never waits forever
// for room that partial frames of other connections hold (they reserved
// their whole size up front, so they can finish). Frames of at most
// smallFrame bytes never wait: metadata, heartbeats and fetch requests
// keep flowing while large produce requests queue.
type budget struct {
	limit int64 // <= 0: unlimited (in-use is still counted)

	mu      sync.Mutex
	inUse   int64
	waiters map[*conn]struct{}
}

// smallFrame is the size at or below which a frame reserves without
// waiting.
const smallFrame = 64 << 10

func newBudget(limit int64) *budget {
	return &budget{limit: limit, waiters: map[*conn]struct{}{}}
}

// reserve takes n bytes for cn's next frame. When the budget is spent it
// returns false and remembers cn, whose loop is woken when bytes return.
func (b *budget) reserve(cn *conn, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limit > 0 && n > smallFrame && b.inUse >= b.limit {
		b.waiters[cn] = struct{}{}
		return false
	}
	b.inUse += n
	return true
}

// take adds n bytes without waiting (a decoded request's estimate on top
// of its frame): it may push in-use past the limit, which makes later
// large frames wait.
func (b *budget) take(n int64) {
	b.mu.Lock()
	b.inUse += n
	b.mu.Unlock()
}

// release gives n bytes back and wakes every connection waiting for room
// (each tries again; they are few, and only while the budget is spent).
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.inUse -= n
	var wake []*conn
	if len(b.waiters) > 0 && (b.limit <= 0 || b.inUse < b.limit) {
		wake = make([]*conn, 0, len(b.waiters))
		for cn := range b.waiters {
			wake = append(wake, cn)
		}
		clear(b.waiters)
	}
	b.mu.Unlock()
	for _, cn := range wake {
		cn.wake()
	}
}

// forget drops a closed connection from the waiters.
func (b *budget) forget(cn *conn) {
	b.mu.Lock()
	delete(b.waiters, cn)
	b.mu.Unlock()
}

func (b *budget) used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}
