package broker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/storage/partlog"
)

// TestRestartDurability writes to several topics and partitions, stops
// the broker, starts a new one on the same data directory and reads
// everything back; offsets, topic ids and configs survive and new writes
// continue where the log ended. Run with fsync-per-ack and with a flush
// interval (where Close must still fsync everything).
func TestRestartDurability(t *testing.T) {
	for _, mode := range []struct {
		name  string
		flush time.Duration
	}{{"fsync before ack", 0}, {"flush interval", time.Hour}} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			opt := brokertest.WithConfig(func(c *broker.Config) { c.FlushInterval = mode.flush })
			b := brokertest.StartIn(t, dir, opt)
			brokertest.CreateTopic(t, b.Addr(), "a", 3, map[string]*string{"segment.bytes": kmsg.StringPtr("2097152"), "internal.segment.bytes": kmsg.StringPtr("4096")})
			brokertest.CreateTopic(t, b.Addr(), "b", 1, nil)
			cl := brokertest.Client(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			ctx := brokertest.Context(t, time.Minute)
			want := map[string][]string{}
			for i := 0; i < 600; i++ {
				topic, p := "a", int32(i%3)
				if i%5 == 0 {
					topic, p = "b", 0
				}
				v := fmt.Sprintf("%s-%d-%04d", topic, p, i)
				key := fmt.Sprintf("%s-%d", topic, p)
				want[key] = append(want[key], v)
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			cl.Close()
			ids := topicIDs(t, b.Addr())
			brokertest.Stop(t, b)

			b = brokertest.StartIn(t, dir, opt)
			if got := topicIDs(t, b.Addr()); fmt.Sprint(got) != fmt.Sprint(ids) {
				t.Fatalf("topic ids changed across the restart: %v, were %v", got, ids)
			}
			got := map[string][]string{}
			for _, r := range consumeN(t, b.Addr(), "a", 480) {
				key := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
				got[key] = append(got[key], string(r.Value))
			}
			for _, r := range consumeN(t, b.Addr(), "b", 120) {
				got["b-0"] = append(got["b-0"], string(r.Value))
			}
			for key, vs := range want {
				if strings.Join(got[key], " ") != strings.Join(vs, " ") {
					t.Fatalf("%s after restart: %d records, want %d in order", key, len(got[key]), len(vs))
				}
			}
			if c := configOf(t, describeTopic(t, b.Addr(), "a"), "segment.bytes"); *c.Value != "2097152" {
				t.Fatalf("segment.bytes after restart: %s", *c.Value)
			}
			// New writes continue at the old log end.
			pr := brokertest.Dial(t, b.Addr()).RoundTrip(brokertest.ProduceRequest("b", 0, -1, brokertest.Batch("next"))).(*kmsg.ProduceResponse)
			if p := pr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 120 {
				t.Fatalf("after restart: %v at %d, want offset 120", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
			}
		})
	}
}

func topicIDs(t *testing.T, addr string) map[string]string {
	t.Helper()
	md, err := brokertest.Admin(t, addr).ListTopics(brokertest.Context(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, d := range md {
		out[name] = d.ID.String()
	}
	return out
}

// TestTornTailRecovery cuts the last segment mid-batch, as a crash during
// a write leaves it, and damages the indexes; the restarted broker ends
// the log at the last whole batch, rebuilds the indexes, reads and looks
// up every surviving batch, and takes new writes at the next offset.
func TestTornTailRecovery(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, partDir string)
	}{
		{"torn tail", func(t *testing.T, partDir string) {}},
		{"torn tail, indexes deleted", func(t *testing.T, partDir string) {
			removeIndexes(t, filepath.Dir(partDir), filepath.Base(partDir))
		}},
		{"torn tail, indexes garbage", func(t *testing.T, partDir string) {
			m, _ := filepath.Glob(filepath.Join(partDir, "*index"))
			for _, p := range m {
				if err := os.WriteFile(p, []byte("this is not an index file"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := brokertest.StartIn(t, dir)
			brokertest.CreateTopic(t, b.Addr(), "torn", 1, map[string]*string{"internal.segment.bytes": kmsg.StringPtr("500"), "index.interval.bytes": kmsg.StringPtr("1")})
			c := brokertest.Dial(t, b.Addr())
			base := time.Now().Add(-time.Hour)
			var sizes []int
			for i := 0; i < 20; i++ {
				batch := brokertest.BuildBatchAt(base.Add(time.Duration(i)*time.Minute), fmt.Sprintf("batch-%02d-a", i), fmt.Sprintf("batch-%02d-b", i))
				sizes = append(sizes, len(batch))
				if p := c.RoundTrip(brokertest.ProduceRequest("torn", 0, -1, batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
					t.Fatal(kerr.ErrorForCode(p.ErrorCode))
				}
			}
			c.Close()
			brokertest.Stop(t, b)

			partDir := filepath.Join(dir, "torn-0")
			last := lastSegment(t, partDir)
			st, err := os.Stat(last)
			if err != nil {
				t.Fatal(err)
			}
			// Cut the last batch in half, and simulate a crash before any
			// checkpoint: no clean-shutdown marker, no recovery point
			// (below a recovery point the cut would be corruption).
			if err := os.Truncate(last, st.Size()-int64(sizes[19]/2)); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(partDir, ".clean-shutdown"))
			os.Remove(filepath.Join(partDir, "recovery-point"))
			tc.damage(t, partDir)

			b = brokertest.StartIn(t, dir)
			if st2, _ := os.Stat(last); st2.Size() != st.Size()-int64(sizes[19]) {
				t.Fatalf("last segment is %d bytes after recovery, want %d (ending at the last whole batch)", st2.Size(), st.Size()-int64(sizes[19]))
			}
			brokertest.CheckWholeBatches(t, partDir)
			cl := brokertest.Client(t, b.Addr())
			c = brokertest.Dial(t, b.Addr())
			if o := listOffset(t, cl, "torn", 8, -1, 0); o.Offset != 38 {
				t.Fatalf("log end %d after recovery, want 38 (19 whole batches of 2)", o.Offset)
			}
			// Lookups through the rebuilt indexes: every batch by offset
			// and by timestamp.
			for i := 0; i < 19; i++ {
				ts := base.Add(time.Duration(i) * time.Minute).UnixMilli()
				if o := listOffset(t, cl, "torn", 8, ts, 0); o.Offset != int64(2*i) {
					t.Fatalf("offset for timestamp of batch %d: %d, want %d", i, o.Offset, 2*i)
				}
				resp := c.RoundTrip(brokertest.FetchRequest("torn", 0, int64(2*i+1), 0, 1, 1, 1)).(*kmsg.FetchResponse)
				batches, err := partlog.SplitBatches(resp.Topics[0].Partitions[0].RecordBatches)
				if err != nil || len(batches) != 1 || !strings.Contains(string(batches[0]), fmt.Sprintf("batch-%02d-b", i)) {
					t.Fatalf("fetch at %d: %d batches, %v", 2*i+1, len(batches), err)
				}
			}
			pr := c.RoundTrip(brokertest.ProduceRequest("torn", 0, -1, brokertest.Batch("after"))).(*kmsg.ProduceResponse)
			if p := pr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 38 {
				t.Fatalf("write after recovery: %v at %d, want 38", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
			}
			recs := consumeN(t, b.Addr(), "torn", 39)
			if string(recs[37].Value) != "batch-18-b" || string(recs[38].Value) != "after" {
				t.Fatalf("records 37, 38: %q %q", recs[37].Value, recs[38].Value)
			}
		})
	}
}

func lastSegment(t *testing.T, partDir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(partDir, "*.log"))
	if err != nil || len(m) < 2 {
		t.Fatalf("segments in %s: %v %v", partDir, m, err)
	}
	sort.Strings(m)
	return m[len(m)-1]
}
