package broker

import (
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
	now, sessions := b.fetchSessions.Snapshot(fetchSessionRows)
	for _, s := range sessions {
		fetcher, addressed := "consumer", "topic name"
		if s.Privileged {
			fetcher = "follower"
		}
		if s.UsesTopicIDs {
			addressed = "topic id"
		}
		p.Rows = append(p.Rows, []string{strconv.Itoa(int(s.ID)), strconv.Itoa(int(s.Epoch)), strconv.Itoa(s.Partitions), fetcher, addressed,
			now.Sub(s.LastUsed).Round(time.Millisecond).String() + " ago", now.Sub(s.Created).Round(time.Second).String()})
	}
	return p
}
