package broker

import (
	"slices"
	"strconv"
	"time"

	"kaas/broker/admin"
)

// fetchSessionRows is the most sessions the inspector's panel lists (the
// most recently used first); kaas_fetch_sessions counts them all.
const fetchSessionRows = 50

// fetchSessionPanel lists the incremental fetch sessions (KIP-227) on the
// inspector's overview: no rows, so no panel, while there are none.
func (b *Broker) fetchSessionPanel() admin.Panel {
	p := admin.Panel{Title: "Fetch sessions (KIP-227)", Columns: []string{"session id", "epoch", "partitions", "fetcher", "addressed by", "last used", "age"}}
	c := b.fetchSessions
	now := c.now()
	c.mu.Lock()
	sessions := make([]*fetchSession, 0, len(c.byID))
	for _, s := range c.byID {
		sessions = append(sessions, s)
	}
	slices.SortFunc(sessions, func(x, y *fetchSession) int { return y.lastUsed.Compare(x.lastUsed) })
	for _, s := range sessions[:min(len(sessions), fetchSessionRows)] {
		s.mu.Lock()
		epoch, size := s.epoch, s.parts.len()
		s.mu.Unlock()
		fetcher, addressed := "consumer", "topic name"
		if s.privileged {
			fetcher = "follower"
		}
		if s.usesTopicIDs {
			addressed = "topic id"
		}
		p.Rows = append(p.Rows, []string{strconv.Itoa(int(s.id)), strconv.Itoa(int(epoch)), strconv.Itoa(size), fetcher, addressed,
			now.Sub(s.lastUsed).Round(time.Millisecond).String() + " ago", now.Sub(s.created).Round(time.Second).String()})
	}
	c.mu.Unlock()
	return p
}
