package broker_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestCompactedTopicKeepsCodecs: librdkafka (kcat) produces a table
// compressed with each codec, then updates half its keys, so the first
// batch keeps half its records and the cleaner rewrites it. A raw Fetch
// shows the rewritten batch (fewer records than its offsets span) still
// compressed with its codec, and kcat and franz-go each read exactly the
// latest value of every key.
func TestCompactedTopicKeepsCodecs(t *testing.T) {
	b := brokertest.Start(t)
	for id, codec := range []string{1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"} {
		if codec == "" {
			continue
		}
		t.Run(codec, func(t *testing.T) {
			topic := "codec-" + codec
			compactedTopic(t, b.Addr(), topic)
			want := map[string]string{}
			round := func(prefix string, keys int, value string) {
				var lines []string
				for k := 0; k < keys; k++ {
					v := fmt.Sprintf("%s-%02d-padding-padding-padding", value, k)
					lines = append(lines, fmt.Sprintf("%s-%02d:%s", prefix, k, v))
					if prefix == "key" {
						want[fmt.Sprintf("key-%02d", k)] = v
					}
				}
				kcat(t, strings.Join(lines, "\n")+"\n", "-b", b.Addr(), "-t", topic, "-P", "-K:", "-z", codec, "-q")
			}
			round("key", 30, "first")
			round("key", 15, "second")
			for i := 0; i < 10; i++ { // closes the table's segments
				round("filler", 30, fmt.Sprint("filler", i))
			}
			table := func(pairs []string) (map[string]string, int) {
				got, n := map[string]string{}, 0
				for _, l := range pairs {
					k, v, _ := strings.Cut(l, "=")
					if strings.HasPrefix(k, "key-") {
						got[k] = v
						n++
					}
				}
				return got, n
			}
			var got map[string]string
			brokertest.Eventually(t, 30*time.Second, "kcat to read one record per key", func() bool {
				out := kcat(t, "", "-b", b.Addr(), "-t", topic, "-C", "-e", "-o", "beginning", "-q", "-f", "%k=%s\n")
				var n int
				got, n = table(strings.Split(strings.TrimSpace(out), "\n"))
				return n == len(want)
			})
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("kcat read %v, want %v", got, want)
			}
			rewritten := 0
			for _, rb := range fetchBatches(t, b.Addr(), topic) {
				if rb.NumRecords > 0 && rb.NumRecords < rb.LastOffsetDelta+1 {
					rewritten++
					if c := rb.Attributes & 7; c != int16(id) {
						t.Fatalf("batch at %d, rewritten with %d of its %d records, has codec %d, want %d",
							rb.FirstOffset, rb.NumRecords, rb.LastOffsetDelta+1, c, id)
					}
				}
			}
			if rewritten == 0 {
				t.Fatal("no batch kept only part of its records")
			}
			cl := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			var pairs []string
			for len(pairs) < 15+30 { // the table and the last filler round at least
				fs := cl.PollFetches(brokertest.Context(t, 20*time.Second))
				if err := fs.Err(); err != nil {
					t.Fatalf("franz-go fetch: %v", err)
				}
				fs.EachRecord(func(r *kgo.Record) { pairs = append(pairs, string(r.Key)+"="+string(r.Value)) })
				if hw := fs.Records(); len(hw) > 0 && strings.HasPrefix(string(hw[len(hw)-1].Key), "filler-29") {
					break
				}
			}
			if fgot, n := table(pairs); n != len(want) || fmt.Sprint(fgot) != fmt.Sprint(want) {
				t.Fatalf("franz-go read %d table records %v, want %v", n, fgot, want)
			}
		})
	}
}

// fetchBatches is every batch of partition 0 of topic, read with one raw
// Fetch from the start.
func fetchBatches(t *testing.T, addr, topic string) []kmsg.RecordBatch {
	t.Helper()
	ctx := brokertest.Context(t, 10*time.Second)
	topics, err := brokertest.Admin(t, addr).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MaxBytes = 10, 16<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topics[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 16 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	resp, err := fetch.RequestWith(ctx, brokertest.Client(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s-0: %v", topic, kerr.ErrorForCode(p.ErrorCode))
	}
	var out []kmsg.RecordBatch
	for raw := p.RecordBatches; len(raw) >= 12; {
		var rb kmsg.RecordBatch
		n := 12 + int(int32(binary.BigEndian.Uint32(raw[8:])))
		if n > len(raw) {
			break // a batch cut short by the limit
		}
		if err := rb.ReadFrom(raw[:n]); err != nil {
			t.Fatalf("batch in the fetch: %v", err)
		}
		out = append(out, rb)
		raw = raw[n:]
	}
	return out
}
