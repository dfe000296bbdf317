package partlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/proc"
	"kaas/storage/durable"
)

// BenchmarkCleanPass: one pass over a compacted log of distinct keys
// (the compact-clean bench's shape: 14-byte keys, 16-byte values, batches
// of 2,000 records, 8 MiB segments), for profiling the pass alone.
func BenchmarkCleanPass(b *testing.B) { benchmarkClean(b, 500_000, 128<<20) }

// BenchmarkCleanPasses: a log of 4 M distinct keys cleaned with the
// default 128 MiB dedupe buffer, in the passes it needs (2), the second
// looking up every key of the part the first cleaned: the compact-clean
// bench's work at a size that fits a benchmark.
func BenchmarkCleanPasses(b *testing.B) { benchmarkClean(b, 4_000_000, 128<<20) }

func benchmarkClean(b *testing.B, keys int, mapBytes int64) {
	const perBatch = 2000
	cfg := testConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 8 << 20
	cfg.MinCleanableRatio = 0
	value := make([]byte, 16)
	var bytes int64
	var cpu time.Duration // on a shared machine the process's CPU time says more than the wall clock
	passes := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		l, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		for k := 0; k < keys; k += perBatch {
			var records []byte
			for j := 0; j < perBatch; j++ {
				rec := kmsg.Record{TimestampDelta64: int64(j), OffsetDelta: int32(j), Key: []byte(fmt.Sprintf("key-%010d", k+j)), Value: value}
				rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
				records = rec.AppendTo(records)
			}
			h := BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastOffsetDelta: perBatch - 1, BaseTimestamp: t0.UnixMilli()}
			if _, err := l.Append(encodeBatch(h, 0, h.BaseTimestamp, h.BaseTimestamp+perBatch-1, perBatch, records), t0); err != nil {
				b.Fatal(err)
			}
		}
		if j := l.PrepareSync(); j != nil {
			if err := j.Run(); err != nil {
				b.Fatal(err)
			}
			l.Advance(j)
		}
		l.Publish(l.HighWatermark())
		for pass := 0; ; pass++ {
			p := l.PlanClean(t0, l.HighWatermark(), nil, "b")
			if p == nil {
				if pass == 0 {
					b.Fatal("no pass planned")
				}
				break
			}
			b.StartTimer()
			c0 := proc.CPU()
			r, err := p.Run(CleanOptions{MapBytes: mapBytes})
			if err != nil {
				b.Fatal(err)
			}
			cpu += proc.CPU() - c0
			passes++
			b.StopTimer()
			bytes += r.Stats.BytesRead
			if _, err := l.InstallCleaned(r, nil); err != nil {
				b.Fatal(err)
			}
		}
		l.Close()
	}
	b.SetBytes(bytes / int64(b.N))
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
}
