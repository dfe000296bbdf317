package broker_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/storage/partlog"
)

// TestOldClientVersions: librdkafka (kcat) speaking as a client of Kafka
// 0.8.2 and 0.9 — no ApiVersions, Produce v0–1 with magic-0 message sets
// (gzip and snappy wrappers too), Fetch v0–1, ListOffsets v0, Metadata v0
// — produces and reads back every record, as Kafka 3.7 still serves them;
// a magic-1 message set (Produce v2) reads back through Fetch v3 with its
// timestamp; and a franz-go consumer reads the same records from the
// magic-2 log they were converted into.
func TestOldClientVersions(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "old", 1, nil)
	var want []string
	for _, fallback := range []string{"0.8.2", "0.9.0"} {
		for _, codec := range []string{"none", "gzip", "snappy"} {
			var lines []string
			for j := 0; j < 20; j++ {
				line := fmt.Sprintf("k%d:v %s %s %02d", j%3, fallback, codec, j)
				lines = append(lines, line)
				want = append(want, strings.Replace(line, ":", "=", 1))
			}
			kcat(t, strings.Join(lines, "\n")+"\n", "-b", b.Addr(), "-t", "old", "-P", "-K:", "-z", codec, "-q",
				"-X", "api.version.request=false", "-X", "broker.version.fallback="+fallback)
		}
	}
	// Produce v2, magic 1 (a 0.10 client), raw.
	c := brokertest.Dial(t, b.Addr())
	pr := brokertest.ProduceRequest("old", 0, 1, messageV1("magic one"))
	pr.Version = 2
	if r := c.RoundTrip(pr).(*kmsg.ProduceResponse); r.Topics[0].Partitions[0].ErrorCode != 0 || r.Topics[0].Partitions[0].BaseOffset != int64(len(want)) {
		t.Fatalf("produce v2: %+v", r.Topics[0].Partitions[0])
	}
	want = append(want, "=magic one")
	fr := brokertest.FetchRequest("old", 0, int64(len(want)-1), 0, 0, 1<<20, 1<<20)
	fr.Version = 3
	fp := c.RoundTrip(fr).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	msgs, magic, err := partlog.ParseMessageSet(fp.RecordBatches, 0)
	if fp.ErrorCode != 0 || err != nil || magic != 1 || len(msgs) != 1 || string(msgs[0].Value) != "magic one" || msgs[0].Timestamp <= 0 || msgs[0].Offset != int64(len(want)-1) {
		t.Fatalf("fetch v3: code %d, %v, magic %d, %+v", fp.ErrorCode, err, magic, msgs)
	}
	sort.Strings(want)
	for _, fallback := range []string{"0.8.2", "0.9.0"} {
		out := kcat(t, "", "-b", b.Addr(), "-t", "old", "-C", "-e", "-o", "beginning", "-q", "-f", "%k=%s\n",
			"-X", "api.version.request=false", "-X", "broker.version.fallback="+fallback)
		got := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(got)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("kcat as %s read %d records, want %d; first %q", fallback, len(got), len(want), got[:min(3, len(got))])
		}
	}
	// The same records through a current client.
	cl := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("old"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	n := 0
	brokertest.Eventually(t, 30*time.Second, "a franz-go consumer reads them all", func() bool {
		fs := cl.PollFetches(brokertest.Context(t, 2*time.Second))
		n += fs.NumRecords()
		return n >= len(want)
	})
	if n != len(want) {
		t.Fatalf("franz-go read %d records, want %d", n, len(want))
	}
}

// TestListOffsetsV0: the old-style list of offsets, as Apache's
// legacyFetchOffsetsBefore answers it for a consumer: latest is the high
// watermark (then segment starts), earliest the log start, at most
// MaxNumOffsets of them; an unknown partition UNKNOWN_TOPIC_OR_PARTITION.
func TestListOffsetsV0(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "lo", 1, nil)
	cl := brokertest.Client(t, b.Addr())
	ctx := brokertest.Context(t, 30*time.Second)
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lo", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := brokertest.Dial(t, b.Addr())
	ask := func(topic string, ts int64, max int32) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 0
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets = ts, max
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.RoundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if p := ask("lo", -1, 1); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 5 {
		t.Fatalf("latest: %+v", p)
	}
	if p := ask("lo", -1, 10); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 2 || p.OldStyleOffsets[0] != 5 || p.OldStyleOffsets[1] != 0 {
		t.Fatalf("latest with the segment starts: %+v", p)
	}
	if p := ask("lo", -2, 1); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 || p.OldStyleOffsets[0] != 0 {
		t.Fatalf("earliest: %+v", p)
	}
	if p := ask("nope", -1, 1); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", p)
	}
	if p := ask("__consumer_offsets", -1, 1); p.ErrorCode != 0 || len(p.OldStyleOffsets) != 1 {
		t.Fatalf("__consumer_offsets: %+v", p)
	}
}
