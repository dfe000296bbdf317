package clustertests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"kaas/broker/brokertest"
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
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.etcd.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := "/kaas/" + c.name + "/"
	reg, err := cl.Get(ctx, root+"brokers/1")
	if err != nil || len(reg.Kvs) != 1 || reg.Kvs[0].Lease == 0 {
		t.Fatalf("broker 1's registration: %v %+v", err, reg)
	}
	owner, _ := json.Marshal(map[string]int32{"broker": 1, "epoch": 0})
	unit := ownership.PartitionUnit(topic, 0)
	if _, err := cl.Put(ctx, root+"owners/"+unit, string(owner), clientv3.WithLease(clientv3.LeaseID(reg.Kvs[0].Lease))); err != nil {
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
