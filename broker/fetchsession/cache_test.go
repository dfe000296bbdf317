package fetchsession

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testSessionCache is a cache with slots and a 2-minute eviction time on a
// clock the test moves.
func testSessionCache(slots int) (*Cache, *time.Time) {
	now := time.Unix(1_000_000, 0)
	c := NewCache(slots, 2*time.Minute, prometheus.NewGauge(prometheus.GaugeOpts{Name: "s"}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "p"}), prometheus.NewCounter(prometheus.CounterOpts{Name: "e"}))
	c.now = func() time.Time { return now }
	return c, &now
}

// partsOf is a session's partitions: n partitions of topic t.
func partsOf(n int) sessionPartitions {
	var sp sessionPartitions
	for i := range n {
		sp.add(&cachedPartition{key: sessionKey{topic: "t", part: int32(i)}})
	}
	return sp
}

// TestFetchSessionEvictionRules are Apache's FetchSessionCache rules
// (FetchSessionTest's testSessionCache / testPrivilegedSessionHandling /
// testLargerSessionsAreEvicted cases).
func TestFetchSessionEvictionRules(t *testing.T) {
	t.Run("a fresh consumer session is kept from consumers, even larger ones", func(t *testing.T) {
		c, _ := testSessionCache(1)
		if c.maybeCreate(false, false, partsOf(2)) == 0 {
			t.Fatal("no session with a free slot")
		}
		if id := c.maybeCreate(false, false, partsOf(10)); id != 0 {
			t.Fatalf("larger session %d evicted a fresh one", id)
		}
	})
	t.Run("an old session gives way to a larger one only", func(t *testing.T) {
		c, now := testSessionCache(1)
		old := c.maybeCreate(false, false, partsOf(5))
		*now = now.Add(3 * time.Minute)
		c.mu.Lock()
		c.touchLocked(c.byID[old], *now, 5) // used: not stale, but old
		c.mu.Unlock()
		*now = now.Add(time.Minute)
		if id := c.maybeCreate(false, false, partsOf(5)); id != 0 {
			t.Fatal("an equal-sized session evicted an old one")
		}
		if id := c.maybeCreate(false, false, partsOf(6)); id == 0 || c.byID[old] != nil {
			t.Fatal("a larger session did not evict the old one")
		}
		if got := testutil.ToFloat64(c.evictions); got != 1 {
			t.Fatalf("evictions %v, want 1", got)
		}
	})
	t.Run("a stale session goes first, for anyone", func(t *testing.T) {
		c, now := testSessionCache(2)
		stale := c.maybeCreate(true, false, partsOf(100))
		*now = now.Add(time.Minute)
		fresh := c.maybeCreate(false, false, partsOf(1))
		*now = now.Add(90 * time.Second) // stale unused 2.5 min, fresh 1.5
		if id := c.maybeCreate(false, false, partsOf(1)); id == 0 || c.byID[stale] != nil || c.byID[fresh] == nil {
			t.Fatal("the stale session was not the one evicted")
		}
	})
	t.Run("a follower's session evicts a fresh consumer's; a consumer's never a follower's", func(t *testing.T) {
		c, now := testSessionCache(1)
		consumer := c.maybeCreate(false, false, partsOf(50))
		follower := c.maybeCreate(true, false, partsOf(1))
		if follower == 0 || c.byID[consumer] != nil {
			t.Fatal("a privileged session did not evict a fresh unprivileged one")
		}
		*now = now.Add(3 * time.Minute)
		c.mu.Lock()
		c.touchLocked(c.byID[follower], *now, 1)
		c.mu.Unlock()
		if id := c.maybeCreate(false, false, partsOf(1000)); id != 0 {
			t.Fatal("an unprivileged session evicted a privileged one")
		}
	})
	t.Run("no slots, no sessions", func(t *testing.T) {
		c, _ := testSessionCache(0)
		if c.maybeCreate(true, false, partsOf(1)) != 0 {
			t.Fatal("session created with no slots")
		}
	})
}

func TestNextFetchEpoch(t *testing.T) {
	for in, want := range map[int32]int32{0: 1, 1: 2, -1: -1, -7: -1, math.MaxInt32: 1} {
		if got := nextFetchEpoch(in); got != want {
			t.Errorf("nextFetchEpoch(%d) = %d, want %d", in, got, want)
		}
	}
}

// TestSessionPartitionsOrder: partitions that returned data move to the
// back; removal keeps the order of the rest.
func TestSessionPartitionsOrder(t *testing.T) {
	sp := partsOf(4)
	sp.toBack(sp.find(sessionKey{topic: "t", part: 3})) // already last
	sp.toBack(sp.find(sessionKey{topic: "t", part: 1})) // 0 2 3 1
	sp.remove(sessionKey{topic: "t", part: 0})
	var got []int32
	for cp := sp.head; cp != nil; cp = cp.next {
		got = append(got, cp.key.part)
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 3 || got[2] != 1 || sp.tail.key.part != 1 || sp.len() != 3 {
		t.Fatalf("order %v", got)
	}
}
