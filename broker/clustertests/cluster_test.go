package clustertests

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/loopback"
)

// Bad starts: etcd unreachable, and a second broker with a live id. Both
// exit non-zero with an error that says what is wrong.
func TestClusterStartErrors(t *testing.T) {
	out, code := brokertest.Run(t, "serve", "--cluster-etcd", "http://127.0.0.1:1", "--broker-id", "1",
		"--listen", loopback.FreeAddr(t), "--data", t.TempDir(), "--admin", "")
	if code == 0 || !strings.Contains(out, "cannot reach etcd") {
		t.Fatalf("etcd unreachable: exit %d\n%s", code, out)
	}
	c := newCluster(t, 1)
	out, code = brokertest.Run(t, append([]string{"serve", "--data", c.dataDir, "--admin", ""}, c.args(1, loopback.FreeAddr(t))...)...)
	if code == 0 || !strings.Contains(out, "broker id 1 is held by the broker at "+c.brokers[1].addr) {
		t.Fatalf("duplicate broker id: exit %d\n%s", code, out)
	}
}

// Three brokers: Metadata and DescribeCluster list all of them, every
// partition has one leader, the partitions are spread over the brokers,
// and records produced through franz-go and kcat (any seed) are read back
// exactly once.
func TestClusterProduceConsume(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "spread", 12
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	byBroker := map[int32]int{}
	for _, le := range leaders {
		byBroker[le[0]]++
	}
	if len(byBroker) != 3 {
		t.Fatalf("partitions led by %v; want all three brokers", byBroker)
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	dc, err := req.RequestWith(brokertest.Context(t, 10*time.Second), c.client())
	if err != nil || dc.ErrorCode != 0 || len(dc.Brokers) != 3 || dc.ControllerID != 1 {
		t.Fatalf("DescribeCluster: %+v %v", dc, err)
	}

	cl := c.client(kgo.DefaultProduceTopic(topic))
	const n = 600
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, kgo.StringRecord(fmt.Sprintf("franz-%d", i)))
	}
	if err := cl.ProduceSync(brokertest.Context(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// kcat, through one seed broker, to a partition led by another.
	var other int32 = -1
	for p, le := range leaders {
		if le[0] != 1 {
			other = p
			break
		}
	}
	kc := exec.Command("kcat", "-b", c.brokers[1].addr, "-t", topic, "-p", strconv.Itoa(int(other)), "-P")
	kc.Stdin = strings.NewReader("kcat-a\nkcat-b\n")
	if out, err := kc.CombinedOutput(); err != nil {
		t.Fatalf("kcat produce: %v\n%s", err, out)
	}
	seen := c.readAll(topic, n+2)
	for i := 0; i < n; i++ {
		if v := fmt.Sprintf("franz-%d", i); seen[v] != 1 {
			t.Fatalf("%s read %d times", v, seen[v])
		}
	}
	if seen["kcat-a"] != 1 || seen["kcat-b"] != 1 {
		t.Fatalf("kcat records read %d/%d times", seen["kcat-a"], seen["kcat-b"])
	}
	out, err := exec.Command("kcat", "-b", c.brokers[3].addr, "-t", topic, "-p", strconv.Itoa(int(other)), "-C", "-e", "-q").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kcat-a\nkcat-b") {
		t.Fatalf("kcat consume: %v\n%s", err, out)
	}

	c.checkLeaderEpochs(topic, other, leaders[other][0], leaders[other][1])
}

// SIGKILL of each broker in turn under produce load: its partitions move
// to the survivors at a higher leader epoch once its lease expires, the
// idempotent producer sees no error, and every acknowledged record is read
// back exactly once. The killed broker restarts and gets its share back by
// graceful hand-off; one survivor is killed in the middle of handing units
// back, and nothing acknowledged is lost then either.
func TestClusterFailoverUnderLoad(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "failover", 12
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	l := startLoad(t, c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0)))
	for _, victim := range []int32{1, 2, 3} {
		before := c.leaders(topic, parts)
		l.progress(t, 50, "records acknowledged before the kill")
		c.brokers[victim].proc.Kill()
		killed := time.Now()
		c.waitMembers(2) // its lease expired, and its owner keys with it
		after := c.leaders(topic, parts, victim)
		t.Logf("broker %d killed: its partitions led elsewhere after %v (session TTL %s; polled every few ms)", victim, time.Since(killed).Round(10*time.Millisecond), testTTL)
		for p, le := range after {
			if before[p][0] == victim && le[1] <= before[p][1] {
				t.Fatalf("partition %d moved from %d without a higher epoch: %v → %v", p, victim, before[p], le)
			}
		}
		l.progress(t, 50, "records acknowledged after the move")
		if victim != 2 {
			c.restart(victim)
			c.waitMembers(3)
			continue
		}
		// Broker 3 took some of 2's units; as 2 rejoins, 3 hands them
		// back one by one. SIGKILL 3 in the middle of that hand-off.
		other := int32(3)
		h0 := c.status(other).Handoffs
		c.restart(victim)
		brokertest.Eventually(t, 30*time.Second, "broker 3 handing units back", func() bool { return c.status(other).Handoffs > h0 })
		c.brokers[other].proc.Kill()
		t.Logf("broker %d killed mid-hand-off", other)
		c.waitMembers(2)
		c.leaders(topic, parts, other)
		l.progress(t, 50, "records acknowledged after the kill mid-hand-off")
		c.restart(other)
		c.waitMembers(3)
	}
	n := l.finish(t, c, topic)
	t.Logf("%d records acknowledged and read back exactly once across 4 kills, one mid-hand-off", n)
}
