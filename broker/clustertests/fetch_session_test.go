package clustertests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// A fetch session (KIP-227) on a broker that loses partitions to a new
// peer: the session's next incremental fetches answer those partitions
// NOT_LEADER_OR_FOLLOWER (a partition with an error is always sent, even
// when the fetcher did not name it), as Apache's broker does, so the
// client re-routes them.
func TestClusterFetchSessionLosesPartitions(t *testing.T) {
	c := newCluster(t, 1)
	const topic, parts = "sessions", 12
	c.createTopic(topic, parts)
	c.leaders(topic, parts)

	raw := brokertest.Dial(t, c.brokers[1].addr)
	full := brokertest.FetchRequest(topic, 0, 0, 0, 1, 1<<20, 1<<20)
	full.SessionEpoch = 0
	for p := int32(1); p < parts; p++ {
		rp := full.Topics[0].Partitions[0]
		rp.Partition = p
		full.Topics[0].Partitions = append(full.Topics[0].Partitions, rp)
	}
	resp := raw.RoundTrip(full).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID == 0 {
		t.Fatalf("full fetch: %v, session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	id := resp.SessionID

	c.start(2)
	c.waitMembers(2)
	epoch := int32(1)
	brokertest.Eventually(t, 30*time.Second, "the session to answer NOT_LEADER_OR_FOLLOWER for every moved partition", func() bool {
		inc := brokertest.FetchRequest(topic, 0, 0, 0, 1, 1<<20, 1<<20)
		inc.SessionID, inc.SessionEpoch, inc.Topics = id, epoch, nil
		epoch++
		resp := raw.RoundTrip(inc).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || resp.SessionID != id {
			t.Fatalf("incremental fetch: %v, session %d (want %d)", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID, id)
		}
		notLeader := map[int32]bool{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				switch {
				case rp.ErrorCode == kerr.NotLeaderForPartition.Code:
					notLeader[rp.Partition] = true
				case rp.ErrorCode != 0:
					t.Fatalf("partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
				}
			}
		}
		// The partitions broker 2 leads now, and only those.
		moved := 0
		for p, le := range c.leaders(topic, parts) {
			if (le[0] == 2) != notLeader[p] {
				return false
			}
			if le[0] == 2 {
				moved++
			}
		}
		return moved > 0
	})
}
