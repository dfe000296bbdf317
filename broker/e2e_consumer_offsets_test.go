package broker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/model/slots"
)

// offsetsReader is a lag tool's view of __consumer_offsets: a franz-go
// consumer of every partition that decodes each record with kmsg's
// OffsetCommitKey/Value and GroupMetadataKey/Value, as Burrow and
// kafka-lag-exporter decode Apache's topic, keeping the latest per key
// (tombstones delete) and the offset of every record it read.
type offsetsReader struct {
	cl      *kgo.Client
	commits map[string]int64 // group/topic/partition → committed offset
	groups  map[string]*kmsg.GroupMetadataValue
	seen    map[int32][]int64 // __consumer_offsets partition → offsets read
}

func newOffsetsReader(t *testing.T, addr string, opts ...kgo.Opt) *offsetsReader {
	if len(opts) == 0 {
		opts = []kgo.Opt{kgo.ConsumeTopics("__consumer_offsets")}
	}
	cl := brokertest.Client(t, addr, append([]kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)...)
	return &offsetsReader{cl: cl, commits: map[string]int64{}, groups: map[string]*kmsg.GroupMetadataValue{}, seen: map[int32][]int64{}}
}

func commitKey(group, topic string, p int32) string {
	return group + "/" + topic + "/" + string(rune('0'+p))
}

// poll reads what is there and folds it in.
func (r *offsetsReader) poll(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	fs := r.cl.PollFetches(ctx)
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("reading %s-%d: %v", topic, p, err)
		}
	})
	fs.EachRecord(func(rec *kgo.Record) {
		r.seen[rec.Partition] = append(r.seen[rec.Partition], rec.Offset)
		if len(rec.Key) < 2 {
			t.Fatalf("record at %d: key of %d bytes", rec.Offset, len(rec.Key))
		}
		switch version := int16(rec.Key[0])<<8 | int16(rec.Key[1]); version {
		case 0, 1:
			var k kmsg.OffsetCommitKey
			if err := k.ReadFrom(rec.Key); err != nil {
				t.Fatalf("offset key at %d: %v", rec.Offset, err)
			}
			if slots.Of(k.Group) != int(rec.Partition) {
				t.Fatalf("group %s's commit in partition %d, Apache's hash says %d", k.Group, rec.Partition, slots.Of(k.Group))
			}
			if rec.Value == nil {
				delete(r.commits, commitKey(k.Group, k.Topic, k.Partition))
				return
			}
			var v kmsg.OffsetCommitValue
			if err := v.ReadFrom(rec.Value); err != nil {
				t.Fatalf("offset value at %d: %v", rec.Offset, err)
			}
			r.commits[commitKey(k.Group, k.Topic, k.Partition)] = v.Offset
		case 2:
			var k kmsg.GroupMetadataKey
			if err := k.ReadFrom(rec.Key); err != nil {
				t.Fatalf("group key at %d: %v", rec.Offset, err)
			}
			if rec.Value == nil {
				delete(r.groups, k.Group)
				return
			}
			v := new(kmsg.GroupMetadataValue)
			if err := v.ReadFrom(rec.Value); err != nil {
				t.Fatalf("group value at %d: %v", rec.Offset, err)
			}
			r.groups[k.Group] = v
		}
	})
}

// TestConsumerOffsetsReadable: a lag tool reading __consumer_offsets sees
// a consumer group's commits and its group metadata in Apache's record
// formats, in the partition Apache's hash puts the group in, soon after
// each commit; deleting the group's offsets shows tombstones; the topic
// stays read-only; ListOffsets agrees with what was read; and after a
// restart, which compacts nothing away, offsets continue from where they
// were (never backwards) and the same records are at the same offsets.
func TestConsumerOffsetsReadable(t *testing.T) {
	dir := t.TempDir()
	cfg := brokertest.WithConfig(func(c *broker.Config) { c.GroupInitialRebalanceDelay = 0 })
	b := brokertest.StartIn(t, dir, cfg)
	ctx := brokertest.Context(t, 2*time.Minute)
	brokertest.CreateTopic(t, b.Addr(), "orders", 2, nil)
	prod := brokertest.Client(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 5; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A real group member consumes and commits.
	const group = "lag-watched"
	cons := brokertest.Client(t, b.Addr(), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 10 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	committedAt := time.Now()

	r := newOffsetsReader(t, b.Addr())
	brokertest.Eventually(t, 30*time.Second, "the lag tool sees both commits and the group", func() bool {
		r.poll(t)
		return r.commits[commitKey(group, "orders", 0)] == 5 && r.commits[commitKey(group, "orders", 1)] == 5 && r.groups[group] != nil
	})
	t.Logf("the lag tool saw the commits %v after the commit's answer", time.Since(committedAt).Round(time.Millisecond))
	if g := r.groups[group]; g.ProtocolType != "consumer" || len(g.Members) != 1 || g.Generation < 1 {
		t.Fatalf("group metadata as read: %+v", g)
	}
	slot := int32(slots.Of(group))
	adm := brokertest.Admin(t, b.Addr())
	ends, err := adm.ListEndOffsets(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("__consumer_offsets", slot)
	if seen := r.seen[slot]; end.Err != nil || len(seen) == 0 || end.Offset <= seen[len(seen)-1] {
		t.Fatalf("end offset %+v, records read at %v", end, seen)
	}
	// Read-only, as before.
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "__consumer_offsets", Partition: slot, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v", err)
	}

	// A new commit shows at a higher offset; deleting partition 1's
	// offset shows its tombstone.
	cons.Close()
	if _, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 0, Offset: 2})); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 30*time.Second, "the new commit", func() bool {
		r.poll(t)
		return r.commits[commitKey(group, "orders", 0)] == 3
	})
	del, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{"orders": {1: {}}})
	if err != nil || del.Error() != nil {
		t.Fatalf("delete offsets: %v %v", err, del.Error())
	}
	brokertest.Eventually(t, 30*time.Second, "the tombstone", func() bool {
		r.poll(t)
		_, ok := r.commits[commitKey(group, "orders", 1)]
		return !ok
	})
	before := append([]int64(nil), r.seen[slot]...)
	endBefore := before[len(before)-1]

	// Restart: the same records at the same offsets, and new ones above.
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir, cfg)
	adm = brokertest.Admin(t, b.Addr())
	if _, err := adm.CommitOffsets(ctx, group, kadm.OffsetsFromRecords(kgo.Record{Topic: "orders", Partition: 0, Offset: 4})); err != nil {
		t.Fatal(err)
	}
	again := newOffsetsReader(t, b.Addr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"__consumer_offsets": {slot: kgo.NewOffset().AtStart()}}))
	brokertest.Eventually(t, 30*time.Second, "the commit after the restart", func() bool {
		again.poll(t)
		return again.commits[commitKey(group, "orders", 0)] == 5
	})
	after := again.seen[slot]
	if after[len(after)-1] <= endBefore {
		t.Fatalf("the commit after the restart is at %d, not above %d", after[len(after)-1], endBefore)
	}
	// Compacted to the latest per key, before as after: every offset read
	// after the restart below endBefore was a record before it too.
	was := map[int64]bool{}
	for _, o := range before {
		was[o] = true
	}
	for _, o := range after {
		if o <= endBefore && !was[o] {
			t.Fatalf("offset %d read after the restart was never a record before it (before: %v)", o, before)
		}
	}
	if _, ok := again.commits[commitKey(group, "orders", 1)]; ok || again.groups[group] == nil {
		t.Fatalf("after the restart: commits %v, group %v", again.commits, again.groups[group])
	}
}

// TestConsumerOffsetsNeedRead: reading __consumer_offsets needs READ on
// it (and listing its offsets DESCRIBE), as Apache's ACLs require.
func TestConsumerOffsetsNeedRead(t *testing.T) {
	s := startSecure(t)
	alice := s.conn(t, lSASL, "alice")
	fetch := func() int16 {
		t.Helper()
		r := alice.RoundTrip(brokertest.FetchRequest("__consumer_offsets", 0, 0, 0, 0, 1<<20, 1<<20)).(*kmsg.FetchResponse)
		return r.Topics[0].Partitions[0].ErrorCode
	}
	if code := fetch(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch without READ: %v", kerr.ErrorForCode(code))
	}
	s.grant(t, kadm.NewACLs().Allow(aliceUser).Topics("__consumer_offsets").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if code := fetch(); code != 0 {
		t.Fatalf("fetch with READ: %v", kerr.ErrorForCode(code))
	}
}
