package clustertests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"kaas/broker/brokertest"
	"kaas/coord"
	"kaas/state/ownership"
)

// Found by the chaos checker: a hand-off whose owner-key delete failed
// (etcd unreachable at that moment: "it goes with the lease") left the
// key under the old owner's lease, which lives on — and the preferred
// owner waited for the key as long as the old owner ran, so the
// partition had no leader. The old owner now deletes, on every reconcile,
// its keys for units it no longer holds. The test leaves such a key the
// way the failed delete does: broker 1's key, under broker 1's lease, for
// a partition rendezvous hashing gives broker 2, made before the topic
// exists so nobody claims it first.
func TestOwnerKeyLeftByAFailedHandOffIsDeleted(t *testing.T) {
	c := newCluster(t, 2)
	topic := ""
	for i := 0; topic == ""; i++ {
		name := fmt.Sprintf("left-key-%d", i)
		if ownership.Owner(ownership.PartitionUnit(name, 0), []int32{1, 2}) == 2 {
			topic = name
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unit := ownership.PartitionUnit(topic, 0)
	if err := coord.LeaveStrayOwnerKey(ctx, []string{c.etcd.Endpoint()}, c.name, unit, 1); err != nil {
		t.Fatal(err)
	}
	c.createTopic(topic, 1)
	led := c.leaders(topic, 1, 1) // led by a live broker other than 1: broker 2
	if led[0][0] != 2 {
		t.Fatalf("%s-0 led by %v, want broker 2", topic, led[0])
	}
	brokertest.Eventually(t, 30*time.Second, "broker 1 to say it deleted the key", func() bool {
		return containsLine(c.brokers[1].proc.Log(), "deleted an owner key left behind by a hand-off")
	})
}

func containsLine(log, s string) bool { return grepLines(log, s, 1) != "" }
