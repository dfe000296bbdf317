package partlog

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/durable"
)

// BenchmarkCleanPass: one pass over a compacted log of distinct keys
// (the compact-clean bench's shape: 14-byte keys, 16-byte values, batches
// of 2,000 records, 8 MiB segments), for profiling the pass alone.
func BenchmarkCleanPass(b *testing.B) {
	const keys, perBatch = 500_000, 2000
	cfg := testConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 8 << 20
	cfg.MinCleanableRatio = 0
	value := make([]byte, 16)
	var bytes int64
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
		p := l.PlanClean(t0, l.HighWatermark(), nil, "b")
		if p == nil {
			b.Fatal("no pass planned")
		}
		b.StartTimer()
		r, err := p.Run(CleanOptions{MapBytes: 128 << 20})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		bytes += r.Stats.BytesRead
		if _, err := l.InstallCleaned(r, nil); err != nil {
			b.Fatal(err)
		}
		l.Close()
	}
	b.SetBytes(bytes / int64(b.N))
}
