package clustertests

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// SIGKILL of a group's coordinator in the middle of a rebalance: member A
// consumes the first half of the records and commits, member B joins, and
// while the group is preparing the rebalance (A not yet rejoined) the
// coordinator is killed; the second half is produced then. The next owner
// of the group's slot loads the committed offsets, both members find it
// and rejoin, and between them they read the second half; nothing of the
// committed first half is read again, and nothing is skipped.
func TestClusterGroupCoordinatorKilledMidRebalance(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts, total, group = "rebal", 6, 600, "rebal-grp"
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	ctx := brokertest.Context(t, 2*time.Minute)
	prod := c.client(kgo.DefaultProduceTopic(topic))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			prod.Produce(ctx, kgo.StringRecord(fmt.Sprintf("r-%d", i)), func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, total/2)

	var mu sync.Mutex
	seen := map[string]int{}
	member := func(name string) (*kgo.Client, func()) {
		cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ClientID(name),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			// Commit what is polled before a rebalance gives it away.
			kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll(),
			kgo.HeartbeatInterval(time.Second), kgo.SessionTimeout(10*time.Second))
		pctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				fs := cl.PollRecords(pctx, 20)
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
				mu.Unlock()
				cl.MarkCommitRecords(fs.Records()...)
				cl.AllowRebalance()
			}
		}()
		return cl, func() { stop(); wg.Wait() }
	}
	a, stopA := member("member-a")
	defer stopA()
	brokertest.Eventually(t, 60*time.Second, "the first half consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == total/2
	})
	if err := a.CommitMarkedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	_, stopB := member("member-b")
	defer stopB()
	brokertest.Eventually(t, 30*time.Second, "the group preparing a rebalance", func() bool {
		return c.groupState(group) == "PreparingRebalance"
	})
	victim := c.killCoordinator(0, group)
	t.Logf("killed coordinator %d mid-rebalance", victim)
	produce(total/2, total)

	brokertest.Eventually(t, 90*time.Second, "every record consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == total
	})
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < total; i++ {
		v := fmt.Sprintf("r-%d", i)
		switch {
		case seen[v] == 0:
			t.Fatalf("%s never read", v)
		case i < total/2 && seen[v] != 1:
			t.Fatalf("%s read %d times: committed before the kill, the new coordinator lost it", v, seen[v])
		}
	}
}
