package clustertests

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// shareKeys are the share group APIs (KIP-932): ShareGroupHeartbeat,
// ShareGroupDescribe, ShareFetch, ShareAcknowledge and the share-group
// offsets admin calls.
var shareKeys = []int16{76, 77, 78, 79, 90, 91, 92}

// TestClusterShareAPIsNotAdvertised pins today's honest state until share
// groups are built for a cluster (docs/groups.md, "Share groups in a
// cluster"): no cluster broker advertises the share APIs, so franz-go's
// share consumer, which decides from ApiVersions, does not try one whose
// state would not survive a change of owner.
func TestClusterShareAPIsNotAdvertised(t *testing.T) {
	c := newCluster(t, 2)
	for _, b := range c.brokers {
		resp := brokertest.Dial(t, b.addr).RoundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		served := map[int16]bool{}
		for _, k := range resp.ApiKeys {
			served[k.ApiKey] = true
		}
		if !served[68] {
			t.Fatalf("broker %s: ApiVersions lacks ConsumerGroupHeartbeat; answer %+v", b.addr, resp)
		}
		for _, k := range shareKeys {
			if served[k] {
				t.Errorf("broker %s advertises %s in a cluster", b.addr, kmsg.NameForKey(k))
			}
		}
	}
}
