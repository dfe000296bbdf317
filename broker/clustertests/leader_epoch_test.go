package clustertests

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// epochHook counts the OffsetForLeaderEpoch requests a client sends.
type epochHook struct{ sent atomic.Int64 }

func (h *epochHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.OffsetForLeaderEpoch) && err == nil {
		h.sent.Add(1)
	}
}

// epochEnd asks broker id for where epoch ended on topic/p.
func (c *cluster) epochEnd(id int32, topic string, p, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	c.t.Helper()
	raw := brokertest.Dial(c.t, c.brokers[id].addr)
	defer raw.Close()
	return raw.RoundTrip(brokertest.OffsetForLeaderEpochRequest(4, topic, p, current, epoch)).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
}

// A partition's leader changes (SIGKILL of its owner): the new owner
// stamps its higher epoch into what it appends, its leader-epoch cache
// holds both epochs, OffsetForLeaderEpoch for the old epoch answers where
// it ended, and a franz-go consumer validates its position with
// OffsetForLeaderEpoch (KIP-320) and reads on without loss or repeat.
func TestClusterLeaderEpochs(t *testing.T) {
	c := newCluster(t, 2)
	const topic = "epochs"
	c.createTopic(topic, 1)
	first := c.leaders(topic, 1)[0]
	leader, e1 := first[0], first[1]
	other := 3 - leader
	if got := c.epochEnd(other, topic, 0, -1, e1); got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("OffsetForLeaderEpoch to broker %d, which does not lead: %v", other, kerr.ErrorForCode(got.ErrorCode))
	}

	hook := &epochHook{}
	producer := c.client(kgo.DefaultProduceTopic(topic))
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.WithHooks(hook), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	produce := func(from, n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, kgo.StringRecord(fmt.Sprint(i)))
		}
		if err := producer.ProduceSync(brokertest.Context(t, 60*time.Second), rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	next := int64(0)
	consume := func(until int64, epoch int32) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for next < until {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed up to %d of %d", next, until)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next || string(r.Value) != fmt.Sprint(next) {
					t.Fatalf("read %q at %d, want %d at %d", r.Value, r.Offset, next, next)
				}
				if r.LeaderEpoch != epoch {
					t.Fatalf("record %d carries leader epoch %d, want %d", r.Offset, r.LeaderEpoch, epoch)
				}
				next++
			})
		}
	}
	produce(0, 10)
	consume(10, e1)

	c.brokers[leader].proc.Kill()
	c.waitMembers(1)
	moved := c.leaders(topic, 1, leader)[0]
	e2 := moved[1]
	if moved[0] != other || e2 <= e1 {
		t.Fatalf("after the kill: led by %d at epoch %d, want %d above %d", moved[0], e2, other, e1)
	}
	produce(10, 5)
	consume(15, e2)
	if hook.sent.Load() == 0 {
		t.Error("the consumer never validated its position with OffsetForLeaderEpoch after the leader changed")
	}

	for _, tc := range []struct {
		current, epoch int32
		code           error
		gotEpoch       int32
		end            int64
	}{
		{e2, e1, nil, e1, 10},     // the old epoch ended where the new one started
		{e2, e2, nil, e2, 15},     // the latest ends at the log end
		{-1, e2 + 1, nil, -1, -1}, // above every epoch
		{e1, e1, kerr.FencedLeaderEpoch, -1, -1},
		{e2 + 1, e1, kerr.UnknownLeaderEpoch, -1, -1},
	} {
		got := c.epochEnd(other, topic, 0, tc.current, tc.epoch)
		if kerr.ErrorForCode(got.ErrorCode) != tc.code || got.LeaderEpoch != tc.gotEpoch || got.EndOffset != tc.end {
			t.Errorf("current %d epoch %d: %v epoch %d end %d, want %v epoch %d end %d", tc.current, tc.epoch,
				kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset, tc.code, tc.gotEpoch, tc.end)
		}
	}
	c.checkLeaderEpochs(topic, 0, other, e2)

	// A fetcher that read epoch e1 past where it ended is told where the
	// logs diverge (Fetch v12+ DivergingEpoch), and reads nothing.
	raw := brokertest.Dial(t, c.brokers[other].addr)
	fr := brokertest.FetchRequest(topic, 0, 12, 0, 1, 1<<20, 1<<20)
	fr.Topics[0].Partitions[0].CurrentLeaderEpoch, fr.Topics[0].Partitions[0].LastFetchedEpoch = e2, e1
	got := raw.RoundTrip(fr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if got.ErrorCode != 0 || len(got.RecordBatches) != 0 || got.DivergingEpoch.Epoch != e1 || got.DivergingEpoch.EndOffset != 10 {
		t.Errorf("fetch at 12 after epoch %d: %v, %d bytes, diverging %+v; want epoch %d end 10", e1, kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches), got.DivergingEpoch, e1)
	}

	// The inspector shows the cache.
	var d struct {
		State struct {
			LeaderEpoch int32 `json:"leader_epoch"`
			Epochs      []struct {
				Epoch       int32 `json:"epoch"`
				StartOffset int64 `json:"start_offset"`
			} `json:"leader_epochs"`
		} `json:"state"`
	}
	if err := json.Unmarshal(c.adminGet(other, "/api/actors/partition/"+topic+"-0"), &d); err != nil {
		t.Fatal(err)
	}
	type entry = struct {
		Epoch       int32 `json:"epoch"`
		StartOffset int64 `json:"start_offset"`
	}
	if want := []entry{{e1, 0}, {e2, 10}}; d.State.LeaderEpoch != e2 || !slices.Equal(d.State.Epochs, want) {
		t.Errorf("inspector: leader epoch %d, cache %v; want %d, %v", d.State.LeaderEpoch, d.State.Epochs, e2, want)
	}
}
