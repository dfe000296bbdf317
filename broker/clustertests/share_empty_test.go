package clustertests

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/sharefetch"
)

// An empty share group (no members, its share state kept) whose state
// is all with partitions other brokers own is still a group, as in
// Apache, whose coordinator keeps an empty share group until it is
// deleted: its coordinator lists it in ListGroups (it used to list only
// the groups its own share coordinator knew) and DeleteGroups deletes it
// with its share state on every owner (it used to answer
// GROUP_ID_NOT_FOUND). The state is made by ShareFetches sent straight
// to two partitions' owners, neither of them the coordinator, by a member
// the coordinator never saw (a partition's owner, as Apache's leader,
// does not ask the coordinator about the member).
func TestClusterEmptyShareGroupListedAndDeleted(t *testing.T) {
	c := newClusterWith(t, 3, func(c *cluster) { c.listen = shareFlags })
	const topic, group, parts = "share-empty", "sg-empty", 6
	c.createTopic(topic, parts)
	owners := c.leaders(topic, parts)
	coordinator := c.groupCoordinatorOf(group)
	ctx := brokertest.Context(t, 2*time.Minute)

	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(parts) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d", p)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	md, err := c.admin().Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	tid := md.Topics[topic].ID

	// One partition on each broker that is not the coordinator.
	held := map[int32]int32{} // owner → partition
	for p := range int32(parts) {
		if o := owners[p][0]; o != coordinator {
			if _, ok := held[o]; !ok {
				held[o] = p
			}
		}
	}
	if len(held) == 0 {
		t.Fatalf("every partition is owned by the coordinator %d: %v", coordinator, owners)
	}
	for owner, p := range held {
		brokertest.Eventually(t, 30*time.Second, fmt.Sprintf("a record of partition %d acquired at its owner %d", p, owner), func() bool {
			req := sharefetch.Request(group, "never-joined-000000000000000", 0, tid, p, 1000, 10)
			resp, err := c.brokerClient(owner).Broker(int(owner)).Request(ctx, req)
			if err != nil {
				return false
			}
			for _, rt := range resp.(*kmsg.ShareFetchResponse).Topics {
				for _, rp := range rt.Partitions {
					if len(rp.AcquiredRecords) > 0 {
						return true
					}
				}
			}
			return false
		})
	}

	// Who lists the group: asked of every broker, as an admin client does.
	listedBy := func() []string {
		var out []string
		for id := range c.brokers {
			req := kmsg.NewPtrListGroupsRequest()
			req.TypesFilter = []string{"share"}
			resp, err := c.brokerClient(id).Broker(int(id)).Request(ctx, req)
			if err != nil {
				t.Fatalf("ListGroups of broker %d: %v", id, err)
			}
			for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
				if g.Group == group {
					out = append(out, fmt.Sprintf("%d:%s/%s", id, g.GroupType, g.GroupState))
				}
			}
		}
		return out
	}
	want := fmt.Sprintf("%d:share/Empty", coordinator)
	if got := listedBy(); len(got) != 1 || got[0] != want {
		t.Fatalf("listed as %v; want once, by its coordinator: %s", got, want)
	}

	adm := c.admin()
	res, err := adm.DeleteGroup(ctx, group)
	if err != nil || res.Err != nil {
		t.Fatalf("deleting the empty share group: %v %v", err, res.Err)
	}
	if got := listedBy(); len(got) != 0 {
		t.Fatalf("listed after its delete: %v", got)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs[group].Offsets[topic] {
		if o.Err != nil || o.StartOffset >= 0 {
			t.Errorf("partition %d after the delete: start offset %d, %v; want no share state", o.Partition, o.StartOffset, o.Err)
		}
	}
}
