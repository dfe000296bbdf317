package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest/sharefetch"
	"kaas/messages"
	"kaas/state/sharegroup"
)

// shareTimings gives share groups test-sized timings and starts them at
// the log start, so records produced before the consumers are delivered.
func shareTimings(lock time.Duration, limit int) func(*Config) {
	return func(c *Config) {
		c.ShareHeartbeatInterval = 100 * time.Millisecond
		c.ShareSessionTimeout = 5 * time.Second
		c.ShareRecordLockDuration = lock
		c.ShareDeliveryCountLimit = limit
		c.ShareAutoOffsetReset = "earliest"
	}
}

// delivery is one record as a share consumer got it.
type delivery struct {
	consumer string
	offset   int64
	count    int32
}

// shareConsumer is a franz-go share consumer that decides each record's
// acknowledgement with ack (nil: accept) and logs every delivery.
type shareConsumer struct {
	name   string
	cl     *kgo.Client
	mu     sync.Mutex
	got    []delivery
	cancel context.CancelFunc
	done   chan struct{}
}

func startShareConsumer(t *testing.T, addr, group, topic, name string, ack func(delivery) kgo.AckStatus) *shareConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ClientID(name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &shareConsumer{name: name, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			for r := range fs.RecordsAll() {
				d := delivery{consumer: name, offset: r.Offset, count: r.DeliveryCount()}
				sc.mu.Lock()
				sc.got = append(sc.got, d)
				sc.mu.Unlock()
				status := kgo.AckAccept
				if ack != nil {
					status = ack(d)
				}
				r.Ack(status)
			}
			_ = cl.FlushAcks(ctx)
		}
	}()
	t.Cleanup(sc.close)
	return sc
}

func (sc *shareConsumer) deliveries() []delivery {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]delivery(nil), sc.got...)
}

func (sc *shareConsumer) close() {
	if sc.cancel == nil {
		return
	}
	sc.cancel()
	<-sc.done
	sc.cl.Close()
	sc.cancel = nil
}

func allDeliveries(cs ...*shareConsumer) []delivery {
	var out []delivery
	for _, c := range cs {
		out = append(out, c.deliveries()...)
	}
	return out
}

// sharePartitionState is one group's share-partition as the coordinator
// holds it.
func sharePartitionState(t *testing.T, b *Broker, group string) (sharegroup.PartitionDescription, bool) {
	t.Helper()
	got := make(chan []sharegroup.Description, 1)
	b.shares.Send(&messages.ShareDescribe{Groups: []string{group}, Reply: func(ds []sharegroup.Description) { got <- ds }})
	ds := <-got
	if len(ds) != 1 || len(ds[0].Partitions) == 0 {
		return sharegroup.PartitionDescription{}, false
	}
	return ds[0].Partitions[0], true
}

// TestShareGroupConsumersShareAPartition: three franz-go share consumers
// on one partition get every record exactly once between them (disjoint:
// each record is locked to the one that acquired it); the accepted window
// moves the SPSO to the end; ShareGroupDescribe shows three members
// sharing the partition, ListGroups a "share" group.
func TestShareGroupConsumersShareAPartition(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), shareTimings(30*time.Second, 5))
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "work", 1)
	const n = 300
	produce(t, addr, "work", 0, n)

	var cs []*shareConsumer
	for _, name := range []string{"a", "b", "c"} {
		cs = append(cs, startShareConsumer(t, addr, "sg", "work", name, nil))
	}
	waitUntil(t, 20*time.Second, "every record delivered", func() (bool, string) {
		return len(allDeliveries(cs...)) >= n, fmt.Sprint(len(allDeliveries(cs...)))
	})
	seen := map[int64]delivery{}
	for _, d := range allDeliveries(cs...) {
		if prev, dup := seen[d.offset]; dup {
			t.Fatalf("offset %d delivered twice: %+v and %+v", d.offset, prev, d)
		}
		if d.count != 1 {
			t.Fatalf("first delivery with count %d: %+v", d.count, d)
		}
		seen[d.offset] = d
	}
	waitUntil(t, 10*time.Second, "the SPSO moves past every accepted record", func() (bool, string) {
		p, ok := sharePartitionState(t, b, "sg")
		return ok && p.Start == n, fmt.Sprintf("%+v", p)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.DescribeShareGroupOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if o := offs["sg"].Offsets["work"][0]; o.Err != nil || o.StartOffset != n || o.Lag != 0 {
		t.Fatalf("share group offsets %+v", offs["sg"])
	}
	waitUntil(t, 10*time.Second, "three members share the partition", func() (bool, string) {
		ds, err := adm.DescribeShareGroups(ctx, "sg")
		if err != nil {
			return false, err.Error()
		}
		d := ds["sg"]
		if d.Err != nil || d.GroupState != "Stable" || d.Assignor != "simple" || len(d.Members) != 3 {
			return false, fmt.Sprintf("%+v", d)
		}
		for _, m := range d.Members {
			if len(m.Assignment["work"]) != 1 {
				return false, fmt.Sprintf("%+v", m)
			}
		}
		return true, ""
	})
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg := listed["sg"]; lg.ProtocolType != "share" || lg.GroupType != "share" || lg.State != "Stable" {
		t.Fatalf("listed: %+v", lg)
	}
}

// TestShareGroupReleaseRejectLimit: released records come back with a
// higher delivery count until group.share.delivery.count.limit archives
// them; rejected records never come back.
func TestShareGroupReleaseRejectLimit(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), shareTimings(30*time.Second, 3))
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "jobs", 1)
	const n = 20
	produce(t, addr, "jobs", 0, n)

	// Even offsets are always released, odd ones rejected.
	c := startShareConsumer(t, addr, "sg", "jobs", "a", func(d delivery) kgo.AckStatus {
		if d.offset%2 == 0 {
			return kgo.AckRelease
		}
		return kgo.AckReject
	})
	waitUntil(t, 20*time.Second, "every record archived", func() (bool, string) {
		p, ok := sharePartitionState(t, b, "sg")
		return ok && p.Start == n, fmt.Sprintf("%+v", p)
	})
	counts := map[int64][]int32{}
	for _, d := range c.deliveries() {
		counts[d.offset] = append(counts[d.offset], d.count)
	}
	for off := int64(0); off < n; off++ {
		want := "[1]"
		if off%2 == 0 {
			want = "[1 2 3]" // released twice, archived at the limit
		}
		if got := fmt.Sprint(counts[off]); got != want {
			t.Fatalf("offset %d delivered with counts %s, want %s", off, got, want)
		}
	}
	p, _ := sharePartitionState(t, b, "sg")
	if p.Stats.Archived != n || p.Stats.Redelivered != n {
		t.Fatalf("stats %+v", p.Stats)
	}
}

// TestShareGroupLockExpiry: a member that acquires records and never
// acknowledges them (its client stops polling) loses them when their lock
// runs out; another member gets them with a delivery count of 2.
func TestShareGroupLockExpiry(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), shareTimings(time.Second, 5))
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "slow", 1)
	const n = 10
	produce(t, addr, "slow", 0, n)

	// The stuck member fetches by hand: one ShareFetch, no acknowledgement.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topicID := topicIDOf(t, b, "slow")
	hb := shareHeartbeat(t, ctx, cl, "sg", "stuck-member", 0, "slow")
	if hb.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(hb.ErrorCode))
	}
	f := shareFetch(t, ctx, cl, "sg", "stuck-member", 0, topicID, nil)
	if got := acquiredCount(f); got != n {
		t.Fatalf("the stuck member acquired %d records, want %d (%+v)", got, n, f)
	}

	waitUntil(t, 10*time.Second, "the locks run out", func() (bool, string) {
		p, _ := sharePartitionState(t, b, "sg")
		return p.Available == n, fmt.Sprintf("%+v", p)
	})
	// Its late acknowledgement is refused.
	late := shareAck(t, ctx, cl, "sg", "stuck-member", 1, topicID, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: n - 1, AcknowledgeTypes: []int8{1}})
	if late.ErrorCode != 0 || late.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRecordState.Code {
		t.Fatalf("late acknowledgement: %+v", late)
	}

	c := startShareConsumer(t, addr, "sg", "slow", "b", nil)
	waitUntil(t, 20*time.Second, "b gets the expired records", func() (bool, string) {
		return len(c.deliveries()) >= n, fmt.Sprint(c.deliveries())
	})
	for _, d := range c.deliveries() {
		if d.count != 2 {
			t.Fatalf("redelivered with count %d: %+v", d.count, d)
		}
	}
	p, _ := sharePartitionState(t, b, "sg")
	if p.Stats.Expired < n {
		t.Fatalf("stats %+v", p.Stats)
	}
}

// TestShareGroupBadInput: each bad request gets Apache's code.
func TestShareGroupBadInput(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), func(c *Config) {
		shareTimings(30*time.Second, 5)(c)
		c.SharePartitionMaxRecordLocks = 10
	})
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "q", 1)
	produce(t, addr, "q", 0, 30)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tid := topicIDOf(t, b, "q")

	if r := shareHeartbeat(t, ctx, cl, "sg", "m1", 3, "q"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat before the group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(t, ctx, cl, "sg", "", 0, "q"); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("no member id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	j := shareHeartbeat(t, ctx, cl, "sg", "m1", 0, "q")
	if j.ErrorCode != 0 || j.MemberEpoch != 1 || j.Assignment == nil || len(j.Assignment.TopicPartitions) != 1 {
		t.Fatalf("join: %+v", j)
	}
	if r := shareHeartbeat(t, ctx, cl, "sg", "m1", 9); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("wrong epoch: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := shareHeartbeat(t, ctx, cl, "sg", "nobody", 1); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// The in-flight bound: 30 records, 10 locks; exact in record_limit
	// mode (batch_optimized would hand out the whole batch of 30).
	f := shareFetchMode(t, ctx, cl, "sg", "m1", 0, tid, nil, 5000, 100, 1)
	if got := acquiredCount(f); got != 10 {
		t.Fatalf("acquired %d with 10 record locks", got)
	}
	if f2 := shareFetchWait(t, ctx, cl, "sg", "m2", 0, tid, nil, 0); acquiredCount(f2) != 0 {
		t.Fatalf("a second member got %d past the bound", acquiredCount(f2))
	}
	// m2 acknowledges m1's records: not its own.
	bad := shareFetchWait(t, ctx, cl, "sg", "m2", 1, tid, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}, 0)
	if code := ackCode(bad); code != kerr.InvalidRecordState.Code {
		t.Fatalf("acknowledging another member's record: %v", kerr.ErrorForCode(code))
	}
	// A session epoch out of order.
	if r := shareFetchWait(t, ctx, cl, "sg", "m1", 5, tid, nil, 0); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("epoch out of order: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// Acknowledgements on a session's first request.
	if r := shareFetchWait(t, ctx, cl, "sg", "m3", 0, tid, []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}, 0); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("acks opening a session: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// ShareAcknowledge cannot open a session; a malformed batch.
	ack := func(epoch int32, batch kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeResponse {
		return shareAck(t, ctx, cl, "sg", "m1", epoch, tid, batch)
	}
	if r := ack(0, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}); r.ErrorCode != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("acknowledge at epoch 0: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	r := ack(1, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 3, AcknowledgeTypes: []int8{1, 1}})
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("wrong number of types: %+v", r)
	}
	r = ack(2, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}})
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("accepting what m1 holds: %+v", r)
	}
	waitUntil(t, 5*time.Second, "the window moves on", func() (bool, string) {
		p, _ := sharePartitionState(t, b, "sg")
		return p.Start == 10, fmt.Sprintf("%+v", p)
	})
	dso := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	dg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	dg.GroupID = "sg"
	dg.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "q", Partitions: []int32{0, 7}}}
	dso.Groups = append(dso.Groups, dg)
	dr, err := dso.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ps := dr.Groups[0].Topics[0].Partitions; len(ps) != 2 || ps[0].StartOffset != 10 || ps[0].Lag != 20 || ps[1].StartOffset != -1 || ps[1].Lag != -1 {
		t.Fatalf("share group offsets %+v", dr.Groups[0])
	}
}

func topicIDOf(t *testing.T, b *Broker, topic string) [16]byte {
	t.Helper()
	tp := b.topics.load().byName[topic]
	if tp == nil {
		t.Fatalf("no topic %s", topic)
	}
	return tp.meta.ID
}

func shareHeartbeat(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, member, epoch, topics
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func shareFetch(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, epoch int32, tid [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareFetchResponse {
	t.Helper()
	return shareFetchWait(t, ctx, cl, group, member, epoch, tid, acks, 5000)
}

func shareFetchWait(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, epoch int32, tid [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, wait int32) *kmsg.ShareFetchResponse {
	t.Helper()
	return shareFetchMode(t, ctx, cl, group, member, epoch, tid, acks, wait, 100, 0)
}

// shareFetchMode is a ShareFetch of up to maxRecords in an acquire mode
// (0 batch_optimized, 1 record_limit).
func shareFetchMode(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, epoch int32, tid [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, wait, maxRecords int32, mode int8) *kmsg.ShareFetchResponse {
	t.Helper()
	resp, err := shareFetchRequest(group, member, epoch, tid, acks, wait, maxRecords, mode).RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// shareFetchRequest builds the ShareFetch of shareFetchMode, for callers
// that send it from another goroutine.
func shareFetchRequest(group, member string, epoch int32, tid [16]byte, acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, wait, maxRecords int32, mode int8) *kmsg.ShareFetchRequest {
	req := sharefetch.Request(group, member, epoch, tid, 0, wait, maxRecords)
	req.ShareAcquireMode = mode
	req.Topics[0].Partitions[0].AcknowledgementBatches = acks
	return req
}

func shareAck(t *testing.T, ctx context.Context, cl *kgo.Client, group, member string, epoch int32, tid [16]byte, batch kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) *kmsg.ShareAcknowledgeResponse {
	t.Helper()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &group, &member, epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = tid
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, batch)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func acquiredCount(r *kmsg.ShareFetchResponse) int {
	n := 0
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			for _, a := range p.AcquiredRecords {
				n += int(a.LastOffset - a.FirstOffset + 1)
			}
		}
	}
	return n
}

func ackCode(r *kmsg.ShareFetchResponse) int16 {
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.AcknowledgeErrorCode != 0 {
				return p.AcknowledgeErrorCode
			}
		}
	}
	return 0
}

// TestShareGroupAlterDeleteOffsets: kadm's AlterShareGroupOffsets and
// DeleteShareGroupOffsets on an empty share group (NON_EMPTY_GROUP while
// it has members); the altered start survives a restart and the next
// fetch starts there; a deleted share-partition starts again from
// share.auto.offset.reset.
func TestShareGroupAlterDeleteOffsets(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir, shareTimings(30*time.Second, 5))
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "reset", 1)
	produce(t, b.Addr(), "reset", 0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if r := shareHeartbeat(t, ctx, cl, "sg", "m1", 0, "reset"); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	var at kadm.Offsets
	at.AddOffset("reset", 0, 7, -1)
	if _, err := adm.AlterShareGroupOffsets(ctx, "sg", at); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("altering a group with members: %v", err)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "sg", "reset"); !errors.Is(err, kerr.NonEmptyGroup) {
		t.Fatalf("deleting in a group with members: %v", err)
	}
	if r := shareHeartbeat(t, ctx, cl, "sg", "m1", -1); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	res, err := adm.AlterShareGroupOffsets(ctx, "sg", at)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := res.Lookup("reset", 0); !ok || e != nil {
		t.Fatalf("alter: %v %v", e, ok)
	}
	cl.Close()
	closeBroker(t, b)

	b = startGroupBroker(t, dir, shareTimings(30*time.Second, 5))
	adm = newAdmin(t, b.Addr())
	offs, err := adm.DescribeShareGroupOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if o := offs["sg"].Offsets["reset"][0]; o.StartOffset != 7 || o.Lag != 3 {
		t.Fatalf("after the restart: %+v", offs["sg"])
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	f := shareFetch(t, ctx, cl, "sg", "m2", 0, topicIDOf(t, b, "reset"), nil)
	if rs := f.Topics[0].Partitions[0].AcquiredRecords; len(rs) != 1 || rs[0].FirstOffset != 7 || rs[0].LastOffset != 9 {
		t.Fatalf("fetch after the alter: %+v", f.Topics[0].Partitions[0])
	}
	// m2 is no member (it never heartbeated): the group is empty.
	if _, err := adm.DeleteShareGroupOffsets(ctx, "sg", "reset"); err != nil {
		t.Fatal(err)
	}
	offs, err = adm.DescribeShareGroupOffsets(ctx, "sg")
	if err != nil {
		t.Fatal(err)
	}
	if len(offs["sg"].Offsets["reset"]) != 0 {
		t.Fatalf("after the delete: %+v", offs["sg"])
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "nosuch", "reset"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("deleting in a group that does not exist: %v", err)
	}
	// One group type per id: sg is a share group.
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.MemberEpoch, cg.RebalanceTimeoutMillis, cg.SubscribedTopicNames = "sg", "c1", 0, 5000, []string{"reset"}
	cg.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r, err := cg.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("a consumer group heartbeat on a share group's id: %v %+v %s", err, r, deref(r.ErrorMessage))
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "sg", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if r, err := jg.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("a classic join on a share group's id: %v %+v", err, r)
	}
	// And the other way: a consumer group's id is no share group to
	// alter or delete offsets in.
	var committed kadm.Offsets
	committed.AddOffset("reset", 0, 3, -1)
	if _, err := adm.CommitOffsets(ctx, "cg", committed); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterShareGroupOffsets(ctx, "cg", at); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("altering share offsets in a consumer group: %v", err)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "cg", "reset"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("deleting share offsets in a consumer group: %v", err)
	}
}

// TestShareSessionEndsWithItsConnection: a member's share session belongs
// to the connection that opened it; when that connection closes the
// records it acquired are available again at once, long before their
// lock (30 s here) runs out.
func TestShareSessionEndsWithItsConnection(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), shareTimings(30*time.Second, 5))
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "conn", 1)
	produce(t, b.Addr(), "conn", 0, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	f := shareFetch(t, ctx, cl, "sg", "leaver", 0, topicIDOf(t, b, "conn"), nil)
	if acquiredCount(f) != 5 {
		t.Fatalf("acquired %d", acquiredCount(f))
	}
	cl.Close()
	waitUntil(t, 10*time.Second, "the records are released with the connection", func() (bool, string) {
		p, _ := sharePartitionState(t, b, "sg")
		return p.Available == 5 && p.Acquired == 0, fmt.Sprintf("%+v", p)
	})
}
