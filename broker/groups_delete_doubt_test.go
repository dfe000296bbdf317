package broker

import (
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/slots"
)

// TestDeleteGroupsNotDurableIsNotAcknowledged: DeleteGroups and
// OffsetDelete whose tombstones cannot be written (the offsets slot's
// lease in doubt) answer NOT_COORDINATOR, as Apache's coordinator answers
// a failed write, and leave the group and its offsets as they were:
// OffsetFetch still shows them. Before, both answered success and the
// group came back after a restart. Once the write can go through, the
// deletes succeed and stay done across a restart.
func TestDeleteGroupsNotDurableIsNotAcknowledged(t *testing.T) {
	const group, topic = "doubt-del", "doubt-del-t"
	var doubt atomic.Bool
	dir := t.TempDir()
	hooks := func(c *Config) {
		c.testHooks = &testHooks{leaseInDoubt: func(kind, n int) bool {
			return kind == offsetsSlots && n == slots.Of(group) && doubt.Load()
		}}
	}
	b := startGroupBroker(t, dir, hooks)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))
	createGroupTopic(t, adm, topic, 2)
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: topic, Partition: 1, At: 7, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, commit); err != nil {
		t.Fatal(err)
	}
	fetched := func(adm *kadm.Client) map[int32]int64 {
		t.Helper()
		resp, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		resp.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				t.Fatalf("OffsetFetch %s/%d: %v", o.Topic, o.Partition, o.Err)
			}
			out[o.Partition] = o.At
		})
		return out
	}
	// One broker, no retries: kadm (and kgo's Client.Request) would retry
	// NOT_COORDINATOR until the doubt ends.
	conn := newClient(t, b).Broker(int(b.cfg.BrokerID))
	deleteGroup := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{group}
		r, err := conn.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	deleteOffset := func() int16 {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := conn.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		resp := r.(*kmsg.OffsetDeleteResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	doubt.Store(true)
	if code := deleteOffset(); code != kerr.NotCoordinator.Code {
		t.Fatalf("OffsetDelete whose tombstone cannot be written: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	if code := deleteGroup(); code != kerr.NotCoordinator.Code {
		t.Fatalf("DeleteGroups whose tombstones cannot be written: %v, want NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	if got := fetched(adm); got[0] != 5 || got[1] != 7 {
		t.Fatalf("offsets after the failed deletes: %v, want both kept (0:5 1:7)", got)
	}
	doubt.Store(false)

	del, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || del.Error() != nil {
		t.Fatalf("OffsetDelete once the write can go through: %v %v", err, del.Error())
	}
	if got := fetched(adm); len(got) != 1 || got[1] != 7 {
		t.Fatalf("offsets after OffsetDelete of partition 0: %v, want only 1:7", got)
	}
	dg, err := adm.DeleteGroups(ctx, group)
	if err != nil || dg.Error() != nil {
		t.Fatalf("DeleteGroups once the write can go through: %v %v", err, dg.Error())
	}

	closeBroker(t, b)
	b = startGroupBroker(t, dir, hooks)
	adm = kadm.NewClient(newClient(t, b, kgo.RequestRetries(3)))
	if got := fetched(adm); len(got) != 0 {
		t.Fatalf("offsets of the deleted group after a restart: %v, want none", got)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed[group]; ok {
		t.Fatalf("deleted group listed after a restart: %+v", listed[group])
	}
}
