// Package fetchsession holds a broker's incremental fetch sessions
// (KIP-227): the cache with Apache's eviction rules (cache.go) and what
// one Fetch does with its session (context.go). It knows nothing of the
// broker; the Fetch handler resolves each request here, serves the fetch
// it is given, and hands the full answer back to be cut down.
package fetchsession

// The fetch session cache (KIP-227), as Apache's FetchSessionCache: at
// most max.incremental.fetch.session.cache.slots sessions on this broker,
// each holding the partitions of one fetcher with what it last asked and
// was last told. A new full fetch gets a session if a slot is free or one
// can be evicted:
//   - the least recently used session, if it was unused for longer than
//     min.incremental.fetch.session.eviction.ms (stale); else
//   - the least valuable evictable session, if the new one is worth more:
//     value orders (privileged, partition count, id), privileged meaning a
//     follower's. A consumer's session may evict only sessions older than
//     the eviction time; a follower's also any consumer's session.
// Evictability and size are those of the session's last use ("touch"),
// as in Apache.
//
// Locking: the cache's mutex guards the cache (ids, use times, sizes,
// counts); each session's own mutex guards its epoch and partitions.
// Fetches run on their own goroutines, so both are needed; the cache lock
// is taken first and never while a session's lock is held.

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kaas/storage/topicstore"
)

// Cache holds this broker's incremental fetch sessions.
type Cache struct {
	slots      int           // 0: no sessions at all
	evictAfter time.Duration // min.incremental.fetch.session.eviction.ms
	now        func() time.Time

	mu         sync.Mutex
	byID       map[int32]*session
	partitions int // cached partitions over all sessions (their sizes at last touch)

	sessionsGauge   prometheus.Gauge
	partitionsGauge prometheus.Gauge
	evictions       prometheus.Counter
}

func NewCache(slots int, evictAfter time.Duration, sessions, partitions prometheus.Gauge, evictions prometheus.Counter) *Cache {
	return &Cache{
		slots: max(slots, 0), evictAfter: evictAfter, now: time.Now,
		byID:          map[int32]*session{},
		sessionsGauge: sessions, partitionsGauge: partitions, evictions: evictions,
	}
}

// session is one fetcher's session.
type session struct {
	id           int32
	privileged   bool // a follower's (replica id >= 0)
	usesTopicIDs bool // created by a v13+ fetch: partitions keyed by topic id
	created      time.Time

	// Guarded by the cache's mutex.
	lastUsed      time.Time
	cachedSize    int  // size at the last touch; -1 once out of the cache
	evictableAll  bool // evictable by any new session (older than evictAfter at last touch)
	evictablePriv bool // evictable by a privileged new session

	mu    sync.Mutex // guards what follows
	epoch int32
	parts sessionPartitions
}

// nextFetchEpoch is the epoch after e (FetchMetadata.nextEpoch): -1 stays
// -1, and after the largest comes 1 (0 is reserved for "new session").
func nextFetchEpoch(e int32) int32 {
	switch {
	case e < 0:
		return -1
	case e == math.MaxInt32:
		return 1
	}
	return e + 1
}

// remove drops the session with id, if any (a full fetch naming it).
func (c *Cache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.byID[id]; s != nil {
		c.removeLocked(s)
	}
}

func (c *Cache) removeLocked(s *session) {
	if c.byID[s.id] != s {
		return
	}
	delete(c.byID, s.id)
	c.partitions -= max(s.cachedSize, 0)
	s.cachedSize = -1
	c.publishLocked()
}

// maybeCreate makes a session for a full fetch if a slot is free or one
// can be evicted, and returns its id (0: none). parts is what the session
// starts with; epoch is 1, the epoch of the fetcher's next request.
func (c *Cache) maybeCreate(privileged, usesTopicIDs bool, parts sessionPartitions) int32 {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.slots && !c.tryEvictLocked(privileged, parts.len(), now) {
		return 0
	}
	s := &session{id: c.newIDLocked(), privileged: privileged, usesTopicIDs: usesTopicIDs, created: now,
		cachedSize: -1, epoch: nextFetchEpoch(0), parts: parts}
	c.byID[s.id] = s
	c.touchLocked(s, now, parts.len())
	return s.id
}

// newIDLocked is a random positive id no live session has (0 means "no
// session" on the wire).
func (c *Cache) newIDLocked() int32 {
	for {
		id := rand.Int32N(math.MaxInt32-1) + 1
		if c.byID[id] == nil {
			return id
		}
	}
}

// tryEvictLocked frees a slot for a new session of size partitions, as
// Apache's FetchSessionCache.tryEvict: a stale session first, else the
// least valuable evictable one if the new session is worth more.
func (c *Cache) tryEvictLocked(privileged bool, size int, now time.Time) bool {
	if c.slots == 0 {
		return false
	}
	var lru, cheapest *session
	for _, s := range c.byID {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) || s.lastUsed.Equal(lru.lastUsed) && s.id < lru.id {
			lru = s
		}
		if (privileged && s.evictablePriv || !privileged && s.evictableAll) && (cheapest == nil || worthLess(s, cheapest)) {
			cheapest = s
		}
	}
	switch {
	case lru == nil:
		return false
	case now.Sub(lru.lastUsed) > c.evictAfter:
		c.evict(lru)
		return true
	case cheapest == nil:
		return false
	case valueLess(privileged, size, 0, cheapest.privileged, cheapest.cachedSize, cheapest.id):
		return false // the new session is worth less than every candidate
	}
	c.evict(cheapest)
	return true
}

func (c *Cache) evict(s *session) {
	c.removeLocked(s)
	c.evictions.Inc()
}

// worthLess orders sessions by Apache's EvictableKey.
func worthLess(a, b *session) bool {
	return valueLess(a.privileged, a.cachedSize, a.id, b.privileged, b.cachedSize, b.id)
}

// valueLess compares (privileged, size, id) keys: unprivileged first, then
// fewer partitions, then the lower id.
func valueLess(ap bool, asize int, aid int32, bp bool, bsize int, bid int32) bool {
	if ap != bp {
		return !ap
	}
	if asize != bsize {
		return asize < bsize
	}
	return aid < bid
}

// touchLocked records a use of s now: its place in the least recently
// used order, its size and whether it may now be evicted.
func (c *Cache) touchLocked(s *session, now time.Time, size int) {
	if c.byID[s.id] != s {
		return
	}
	s.lastUsed = now
	c.partitions += size - max(s.cachedSize, 0)
	s.cachedSize = size
	old := now.Sub(s.created) > c.evictAfter
	s.evictablePriv = !s.privileged || old
	s.evictableAll = old
	c.publishLocked()
}

func (c *Cache) publishLocked() {
	c.sessionsGauge.Set(float64(len(c.byID)))
	c.partitionsGauge.Set(float64(c.partitions))
}

// sessionKey names a partition in a session: by topic id in a session of
// v13+ fetches, by topic name before.
type sessionKey struct {
	id    topicstore.UUID
	topic string
	part  int32
}

// cachedPartition is one partition of a session: what the fetcher last
// asked for, and what it was last told (to answer only what changed).
type cachedPartition struct {
	key              sessionKey
	fetchOffset      int64
	logStartOffset   int64 // the fetcher's
	maxBytes         int32
	leaderEpoch      int32
	lastFetchedEpoch int32
	highWatermark    int64 // last sent; -1 after an error, so it is sent again
	localLogStart    int64 // last sent log start offset

	prev, next *cachedPartition
}

// sessionPartitions is a session's partitions in order (an insertion
// ordered set, as Apache's ImplicitLinkedHashCollection): incremental
// fetches read them in this order, and a partition that returned data
// moves to the back so others get the byte budget first next time.
type sessionPartitions struct {
	byKey      map[sessionKey]*cachedPartition
	head, tail *cachedPartition
}

func (sp *sessionPartitions) len() int { return len(sp.byKey) }

func (sp *sessionPartitions) find(k sessionKey) *cachedPartition { return sp.byKey[k] }

// add appends p (whose key is not in the set yet).
func (sp *sessionPartitions) add(p *cachedPartition) {
	if sp.byKey == nil {
		sp.byKey = map[sessionKey]*cachedPartition{}
	}
	sp.byKey[p.key] = p
	p.prev, p.next = sp.tail, nil
	if sp.tail != nil {
		sp.tail.next = p
	} else {
		sp.head = p
	}
	sp.tail = p
}

func (sp *sessionPartitions) remove(k sessionKey) bool {
	p := sp.byKey[k]
	if p == nil {
		return false
	}
	delete(sp.byKey, k)
	sp.unlink(p)
	return true
}

func (sp *sessionPartitions) unlink(p *cachedPartition) {
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		sp.head = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		sp.tail = p.prev
	}
	p.prev, p.next = nil, nil
}

// toBack moves p to the end of the order.
func (sp *sessionPartitions) toBack(p *cachedPartition) {
	if sp.tail == p {
		return
	}
	sp.unlink(p)
	p.prev = sp.tail
	sp.tail.next = p
	sp.tail = p
}
