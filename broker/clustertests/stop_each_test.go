package clustertests

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// SIGSTOP of the brokers in turn under produce load, each for longer than
// its session (until etcd has expired its lease and the survivors lead its
// partitions at a higher epoch), then SIGCONT: the stopped broker finds
// its lease gone, gives its partitions up without writing to them and
// rejoins. Every record the idempotent producer had acknowledged is read
// back exactly once at the end. (TestClusterDeposedOwner stops broker 2
// with an offset-commit stream and restarts everything after; together
// every broker is stopped once.)
func TestClusterEachBrokerStoppedInTurn(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "stopped", 9
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	// A short metadata age: the client finds the new leaders at once
	// rather than after franz-go's default 5 s (the test is about the
	// brokers, and the suite's time).
	l := startLoad(t, c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.MetadataMinAge(250*time.Millisecond)))
	// Broker 2 is stopped by TestClusterDeposedOwner.
	for _, victim := range []int32{1, 3} {
		before := c.leaders(topic, parts)
		l.progress(t, 50, "records acknowledged before the stop")
		m := c.brokers[victim]
		if err := m.proc.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		c.waitMembers(2, victim) // etcd expired its lease
		after := c.leaders(topic, parts, victim)
		for p, le := range after {
			if before[p][0] == victim && le[1] <= before[p][1] {
				t.Fatalf("partition %d moved from stopped broker %d without a higher epoch: %v → %v", p, victim, before[p], le)
			}
		}
		l.progress(t, 50, "records acknowledged while the broker is stopped")
		lost := strings.Count(m.proc.Log(), "session lease lost")
		if err := m.proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		brokertest.Eventually(t, 30*time.Second, "the stopped broker to notice its lease is gone", func() bool {
			return strings.Count(m.proc.Log(), "session lease lost") > lost
		})
		c.waitMembers(3)
	}
	n := l.finish(t, c, topic)
	t.Logf("%d records acknowledged and read back exactly once across 2 stops", n)
}
