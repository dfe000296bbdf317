package clustertests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// etcd lost while the brokers run, under produce load: once a broker's
// lease is no longer certainly alive (one TTL minus the margin after the
// last keep-alive it sent) it answers Produce NOT_LEADER_OR_FOLLOWER and
// appends nothing; when etcd is back (same data, same address) the
// brokers' leases are renewed, they acknowledge again, and the idempotent
// producer, which only ever saw retriable errors, gets every record
// through: each acknowledged one is read back exactly once.
func TestClusterEtcdLostAndBack(t *testing.T) {
	c := newCluster(t, 2)
	const topic, parts = "etcd-lost", 4
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	l := startLoad(t, c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)))
	l.progress(t, 50, "records acknowledged before etcd goes")

	c.etcd.Close()
	for id := range c.brokers {
		brokertest.Eventually(t, 30*time.Second, "broker's lease in doubt", func() bool { return !c.status(id).Alive })
	}
	// A Produce straight to each partition's leader: refused (and not
	// appended: counted at the end).
	for p, le := range leaders {
		req := brokertest.ProduceRequest(topic, p, -1, brokertest.Batch("refused"))
		resp, err := req.RequestWith(brokertest.Context(t, 10*time.Second), c.brokerClient(le[0]))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("produce to %s-%d on broker %d with its lease in doubt: %v", topic, p, le[0], kerr.ErrorForCode(code))
		}
	}

	c.restartEtcd()
	for id := range c.brokers {
		brokertest.Eventually(t, 60*time.Second, "broker's lease alive again", func() bool { return c.status(id).Alive })
	}
	l.progress(t, 50, "records acknowledged once etcd is back")
	n := l.finish(t, c, topic)
	// Every offset holds an acknowledged record, once: none of the
	// refused ones was appended.
	total := int64(0)
	for _, end := range c.endOffsets(topic) {
		total += end
	}
	if total != int64(n) {
		t.Fatalf("%d records in the log, %d acknowledged", total, n)
	}
}
