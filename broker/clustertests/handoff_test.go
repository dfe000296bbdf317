package clustertests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/model/slots"
	"kaas/state/ownership"
)

// movingGroup is a group id whose offsets slot broker 3 takes over from
// brokers 1 and 2 when it joins (rendezvous hashing, as the brokers
// compute it).
func movingGroup(prefix string) string {
	for i := 0; ; i++ {
		g := fmt.Sprintf("%s-%d", prefix, i)
		u := ownership.OffsetsSlotUnit(slots.Of(g))
		if ownership.Owner(u, []int32{1, 2, 3}) == 3 {
			return g
		}
	}
}

// A broker joining takes its share of the coordinator slots by graceful
// hand-off. A JoinGroup parked at the old coordinator (a rebalance
// waiting for a member with a five-minute rebalance timeout) is answered
// NOT_COORDINATOR as the slot closes, not left to the client's timeout;
// and a franz-go consumer group whose slot moves carries on at the new
// coordinator from its committed offsets, reading everything exactly
// once.
func TestClusterGroupHandoff(t *testing.T) {
	c := newCluster(t, 2)
	const topic, parts, total = "handoff", 3, 200
	c.createTopic(topic, parts)
	c.leaders(topic, parts)
	ctx := brokertest.Context(t, 3*time.Minute)
	produce := func(from, to int) {
		prod := c.client(kgo.DefaultProduceTopic(topic))
		for i := from; i < to; i++ {
			prod.Produce(ctx, kgo.StringRecord(fmt.Sprintf("h-%d", i)), func(_ *kgo.Record, err error) {
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

	consumed := c.groupCoordinatorOf(movingGroup("kgo"))
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(movingGroup("kgo")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(100*time.Millisecond))
	seen := map[string]int{}
	poll := func(want int) {
		brokertest.Eventually(t, 60*time.Second, fmt.Sprintf("%d records consumed by the group", want), func() bool {
			fs := cons.PollFetches(brokertest.Context(t, 2*time.Second))
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			return len(seen) >= want
		})
	}
	poll(total / 2)

	// Park a JoinGroup: member one joins and syncs; member two's join
	// then waits for member one to rejoin.
	parked := movingGroup("parked")
	old := c.groupCoordinatorOf(parked)
	raw := c.client().Broker(int(old))
	join := func(member string) *kmsg.JoinGroupResponse {
		t.Helper()
		for {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Group, req.MemberID, req.ProtocolType = parked, member, "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60_000, 300_000
			p := kmsg.NewJoinGroupRequestProtocol()
			meta := kmsg.NewConsumerMemberMetadata()
			meta.Topics = []string{topic}
			p.Name, p.Metadata = "range", meta.AppendTo(nil)
			req.Protocols = []kmsg.JoinGroupRequestProtocol{p}
			resp, err := req.RequestWith(ctx, raw)
			if err != nil {
				t.Fatalf("JoinGroup: %v", err)
			}
			if resp.ErrorCode != kerr.MemberIDRequired.Code {
				return resp
			}
			member = resp.MemberID
		}
	}
	first := join("")
	if first.ErrorCode != 0 {
		t.Fatalf("first JoinGroup: %v", kerr.ErrorForCode(first.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = parked, first.MemberID, first.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if resp, err := sync.RequestWith(ctx, raw); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("SyncGroup: %v %v", err, resp)
	}
	answer := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { answer <- join("") }()
	brokertest.Eventually(t, 30*time.Second, "the second member's JoinGroup parked", func() bool {
		return c.groupState(parked) == "PreparingRebalance"
	})

	c.start(3)
	c.waitMembers(3)
	select {
	case resp := <-answer:
		if resp.ErrorCode != kerr.NotCoordinator.Code {
			t.Fatalf("the parked JoinGroup was answered %v, want NOT_COORDINATOR", kerr.ErrorForCode(resp.ErrorCode))
		}
	case <-ctx.Done():
		t.Fatal("the parked JoinGroup was not answered when its slot moved")
	}
	// The slots' keys go once the old owner has closed them; broker 3
	// claims them then.
	for _, g := range []string{parked, movingGroup("kgo")} {
		brokertest.Eventually(t, 30*time.Second, g+" coordinated by the new broker", func() bool {
			return c.groupCoordinatorOf(g) == 3
		})
	}
	t.Logf("groups %s and %s moved from brokers %d and %d to broker 3", parked, movingGroup("kgo"), old, consumed)

	// The consumer group carries on.
	produce(total/2, total)
	poll(total)
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s consumed %d times", v, n)
		}
	}
	// (Autocommit commits what the poll before the last returned.)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing at the new coordinator: %v", err)
	}
	ends := c.endOffsets(topic)
	adm := c.admin()
	brokertest.Eventually(t, 30*time.Second, "the group's offsets committed at the new coordinator", func() bool {
		got, err := adm.FetchOffsets(brokertest.Context(t, 5*time.Second), movingGroup("kgo"))
		if err != nil || got.Error() != nil {
			return false
		}
		done := true
		for p, end := range ends {
			if o, ok := got.Lookup(topic, p); end > 0 && (!ok || o.At != end) {
				done = false
			}
		}
		return done
	})
}
