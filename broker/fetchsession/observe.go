package fetchsession

import (
	"slices"
	"time"
)

// Info is one session as the inspector shows it.
type Info struct {
	ID           int32
	Epoch        int32
	Partitions   int
	Privileged   bool // a follower's
	UsesTopicIDs bool // partitions named by topic id (v13+ fetches)
	LastUsed     time.Time
	Created      time.Time
}

// Snapshot is the cache's clock now and at most n sessions, the most
// recently used first.
func (c *Cache) Snapshot(n int) (time.Time, []Info) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	sessions := make([]*session, 0, len(c.byID))
	for _, s := range c.byID {
		sessions = append(sessions, s)
	}
	slices.SortFunc(sessions, func(x, y *session) int { return y.lastUsed.Compare(x.lastUsed) })
	out := make([]Info, 0, min(len(sessions), n))
	for _, s := range sessions[:min(len(sessions), n)] {
		s.mu.Lock()
		epoch, size := s.epoch, s.parts.len()
		s.mu.Unlock()
		out = append(out, Info{ID: s.id, Epoch: epoch, Partitions: size, Privileged: s.privileged,
			UsesTopicIDs: s.usesTopicIDs, LastUsed: s.lastUsed, Created: s.created})
	}
	return now, out
}
