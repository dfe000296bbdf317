package clustertests

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// A graceful rolling restart of all three brokers under load (SIGTERM,
// as Kubernetes sends): each hands its partitions off before it exits, so
// a franz-go producer with default retries sees no error, and every
// acknowledged record is read back exactly once.
func TestClusterRollingRestart(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "rolling", 12
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	l := startLoad(t, cl)
	for _, id := range []int32{1, 2, 3} {
		l.progress(t, 50, "records acknowledged before the restart")
		m := c.brokers[id]
		if err := m.proc.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code, err := m.proc.Wait(60 * time.Second); err != nil || code != 0 {
			t.Fatalf("broker %d: exit %d, %v\n%s", id, code, err, m.proc.Log())
		}
		c.restart(id)
		c.waitMembers(3)
		c.leaders(topic, parts)
	}
	l.progress(t, 50, "records acknowledged after the last restart")
	n := l.finish(t, c, topic)
	t.Logf("%d records acknowledged and read back exactly once across a rolling restart", n)
}

// The deposed owner: a broker stopped (SIGSTOP) for longer than its
// session TTL under produce load loses its partitions to its peers at a
// higher epoch; when it continues (SIGCONT) it finds its lease gone,
// acknowledges nothing more, gives its partitions up without writing to
// them, and rejoins. Every acknowledged record is read back exactly once,
// and a restart of every broker recovers the same logs.
func TestClusterDeposedOwner(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "deposed", 12
	c.createTopic(topic, parts)
	before := c.leaders(topic, parts)
	l := startLoad(t, c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)))
	l.progress(t, 100, "records acknowledged before the stop")
	victim := c.brokers[2]
	if err := victim.proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	after := c.leaders(topic, parts, 2)
	for p, le := range after {
		if before[p][0] == 2 && le[1] <= before[p][1] {
			t.Fatalf("partition %d moved from the stopped broker without a higher epoch: %v → %v", p, before[p], le)
		}
	}
	for p, le := range after {
		if before[p][0] == 2 {
			c.checkLeaderEpochs(topic, p, le[0], le[1]) // the old epoch is fenced
			break
		}
	}
	l.progress(t, 100, "records acknowledged while the old owner is stopped")
	if d := time.Since(stopped); d < 3*time.Second {
		time.Sleep(3*time.Second - d) // stopped well past its 2 s TTL
	}
	if err := victim.proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// It finds its lease gone, abandons its partitions without writing,
	// and joins again with a new lease.
	brokertest.Eventually(t, 30*time.Second, "the old owner to notice its lease is gone", func() bool {
		return strings.Contains(victim.proc.Log(), "session lease lost")
	})
	c.waitMembers(3)
	c.leaders(topic, parts)
	l.progress(t, 100, "records acknowledged after the old owner came back")
	n := l.finish(t, c, topic)

	// Every broker restarts (gracefully): the logs recover the same.
	ends := c.endOffsets(topic)
	for _, id := range []int32{1, 2, 3} {
		m := c.brokers[id]
		_ = m.proc.Signal(syscall.SIGTERM)
		if _, err := m.proc.Wait(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int32{1, 2, 3} {
		c.restart(id)
	}
	c.waitMembers(3)
	c.leaders(topic, parts)
	if again := c.endOffsets(topic); fmt.Sprint(again) != fmt.Sprint(ends) {
		t.Fatalf("end offsets before the restart %v, after %v", ends, again)
	}
	t.Logf("%d records acknowledged and read back exactly once; logs recovered the same", n)
}
