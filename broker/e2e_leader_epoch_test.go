package broker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// offsetForLeaderEpoch sends one OffsetForLeaderEpoch request for one
// partition at exactly version v (a bare connection: kgo would pick its
// own version, and route by topic).
func offsetForLeaderEpoch(t *testing.T, c *brokertest.Conn, v int16, topic string, partition, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	c.Send(brokertest.OffsetForLeaderEpochRequest(v, topic, partition, current, epoch))
	_, r, err := c.Read(10 * time.Second)
	if err != nil {
		t.Fatalf("OffsetForLeaderEpoch v%d: %v", v, err)
	}
	resp := r.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("OffsetForLeaderEpoch v%d: answer %+v", v, resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// TestOffsetForLeaderEpochSingleBroker: a single broker leads every
// partition at epoch 0 (what Metadata says), stamps it into every batch,
// and answers OffsetForLeaderEpoch (key 23) at every version as Apache
// does; ListOffsets names the epoch of what it finds.
func TestOffsetForLeaderEpochSingleBroker(t *testing.T) {
	b := brokertest.Start(t)
	const topic = "epochs"
	brokertest.CreateTopic(t, b.Addr(), topic, 1, nil)
	cl := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := brokertest.Context(t, 30*time.Second)
	// Timestamps a millisecond apart: two records produced within one
	// millisecond would tie for the max timestamp, which names the first.
	base := time.Now()
	for i, v := range []string{"a", "b", "c"} {
		r := &kgo.Record{Topic: topic, Value: []byte(v), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 3; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if r.LeaderEpoch != 0 {
				t.Errorf("record %d carries leader epoch %d, want 0", r.Offset, r.LeaderEpoch)
			}
		})
	}

	api := kmsg.NewPtrApiVersionsRequest()
	versions, err := api.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, k := range versions.ApiKeys {
		advertised = advertised || (k.ApiKey == 23 && k.MinVersion == 0 && k.MaxVersion == 4)
	}
	if !advertised {
		t.Fatal("ApiVersions does not advertise OffsetForLeaderEpoch v0-4")
	}

	conn := brokertest.Dial(t, b.Addr())
	type want struct {
		code  int16
		epoch int32
		end   int64
	}
	for v := int16(0); v <= 4; v++ {
		for _, c := range []struct {
			name             string
			topic            string
			partition        int32
			current, request int32
			want             want
		}{
			{"the latest epoch ends at the log end", topic, 0, -1, 0, want{0, 0, 3}},
			{"an undefined epoch", topic, 0, -1, -1, want{0, -1, -1}},
			{"an epoch above every epoch", topic, 0, -1, 1, want{0, -1, -1}},
			{"the current epoch, given", topic, 0, 0, 0, want{0, 0, 3}},
			{"a newer current epoch", topic, 0, 1, 0, want{kerr.UnknownLeaderEpoch.Code, -1, -1}},
			{"no such partition", topic, 7, -1, 0, want{kerr.UnknownTopicOrPartition.Code, -1, -1}},
			{"no such topic", "nope", 0, -1, 0, want{kerr.UnknownTopicOrPartition.Code, -1, -1}},
			{"an internal topic", "__consumer_offsets", 0, -1, 0, want{0, 0, 0}},
		} {
			if v < 2 && c.current >= 0 {
				continue // no CurrentLeaderEpoch before v2
			}
			got := offsetForLeaderEpoch(t, conn, v, c.topic, c.partition, c.current, c.request)
			w := c.want
			if v == 0 {
				w.epoch = -1 // not in a v0 answer
			}
			if got.ErrorCode != w.code || got.LeaderEpoch != w.epoch || got.EndOffset != w.end {
				t.Errorf("v%d %s: %v epoch %d end %d, want %v epoch %d end %d", v, c.name,
					kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset, kerr.ErrorForCode(w.code), w.epoch, w.end)
			}
		}
	}

	// Fetch v12+ with a LastFetchedEpoch (Apache checks it for any
	// fetcher): an epoch the cache places at or past the fetch offset
	// reads on; one above every epoch is OFFSET_OUT_OF_RANGE.
	for _, c := range []struct {
		lastEpoch int32
		code      int16
		records   bool
	}{{-1, 0, true}, {0, 0, true}, {1, kerr.OffsetOutOfRange.Code, false}} {
		fr := brokertest.FetchRequest(topic, 0, 2, 0, 1, 1<<20, 1<<20)
		fr.Topics[0].Partitions[0].LastFetchedEpoch = c.lastEpoch
		conn.Send(fr)
		_, r, err := conn.Read(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := r.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if got.ErrorCode != c.code || (len(got.RecordBatches) > 0) != c.records || got.DivergingEpoch.Epoch != -1 {
			t.Errorf("fetch with last fetched epoch %d: %v, %d bytes, diverging %+v", c.lastEpoch, kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches), got.DivergingEpoch)
		}
	}

	for _, c := range []struct {
		timestamp int64
		offset    int64
		epoch     int32
	}{{-1, 3, 0}, {-2, 0, 0}, {-3, 2, 0}, {0, 0, 0}, {time.Now().Add(time.Hour).UnixMilli(), -1, -1}} {
		got := listOffset(t, cl, topic, 8, c.timestamp, 0)
		if got.ErrorCode != 0 || got.Offset != c.offset || got.LeaderEpoch != c.epoch {
			t.Errorf("ListOffsets %d: offset %d epoch %d (%v), want %d epoch %d", c.timestamp, got.Offset, got.LeaderEpoch, kerr.ErrorForCode(got.ErrorCode), c.offset, c.epoch)
		}
	}
}

// TestLeaderEpochCacheSurvivesCrash: the cache is on disk before the first
// batch of an epoch, so a SIGKILL keeps it; deleted, it is rebuilt from
// the batch headers at the next start.
func TestLeaderEpochCacheSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	p := brokertest.Serve(t, dir)
	const topic = "crash"
	brokertest.CreateTopic(t, p.Addr, topic, 1, nil)
	cl := brokertest.Client(t, p.Addr)
	ctx := brokertest.Context(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("a")}, &kgo.Record{Topic: topic, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, topic+"-0", "leader-epoch-checkpoint")
	const want = "0\n1\n0 0\n" // Apache's format: version, count, "epoch start"
	check := func(addr string) {
		t.Helper()
		if got := offsetForLeaderEpoch(t, brokertest.Dial(t, addr), 4, topic, 0, 0, 0); got.ErrorCode != 0 || got.LeaderEpoch != 0 || got.EndOffset != 2 {
			t.Fatalf("after the restart: %v epoch %d end %d, want epoch 0 end 2", kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Fatalf("%s holds %q (%v), want %q", file, b, err, want)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != want {
		t.Fatalf("%s holds %q (%v) after the first batch, want %q", file, b, err, want)
	}
	p.Kill()
	p = brokertest.Serve(t, dir)
	check(p.Addr)
	p.Kill()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	p = brokertest.Serve(t, dir)
	check(p.Addr)
}
