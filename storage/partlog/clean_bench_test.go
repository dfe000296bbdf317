package partlog

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/proc"
	"kaas/storage/durable"
	"kaas/storage/partlog/batchtest"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
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

// BenchmarkCleanTable: one pass over the compact-clean bench's table
// (its partition at half the size): 1 M records of 200 random bytes over
// 250 k keys updated in random order, in snappy batches of 4,000 records
// (what its franz-go producer writes) and 64 MiB segments, so that every
// segment loses about three records in four and is rewritten.
func BenchmarkCleanTable(b *testing.B) {
	pool := make([]byte, 1<<20+200)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(pool) // incompressible
	benchmarkCleanShape(b, cleanShape{records: 1_000_000, keys: 250_000, perBatch: 4000, segment: 64 << 20, codec: batchtest.Snappy,
		value: func(i int) []byte { at := (i * 200) % (1 << 20); return pool[at : at+200] }}, 128<<20)
}

func benchmarkClean(b *testing.B, keys int, mapBytes int64) {
	value := make([]byte, 16)
	benchmarkCleanShape(b, cleanShape{records: keys, keys: keys, perBatch: 2000, segment: 8 << 20, value: func(int) []byte { return value }}, mapBytes)
}

// cleanShape is a benchmark's log: records records over keys keys (each
// once, in order, if as many; else drawn at random), perBatch a batch.
type cleanShape struct {
	records, keys, perBatch int
	segment                 int64
	codec                   int16
	value                   func(i int) []byte
}

func benchmarkCleanShape(b *testing.B, shape cleanShape, mapBytes int64) {
	perBatch := shape.perBatch
	cfg := testConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = shape.segment
	cfg.MinCleanableRatio = 0
	keyOf := func(i int) int { return i }
	if shape.keys < shape.records {
		r := rand.New(rand.NewPCG(3, 4))
		keyOf = func(int) int { return r.IntN(shape.keys) }
	}
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
		for k := 0; k < shape.records; k += perBatch {
			var records []byte
			for j := 0; j < perBatch; j++ {
				rec := kmsg.Record{TimestampDelta64: int64(j), OffsetDelta: int32(j), Key: []byte(fmt.Sprintf("key-%010d", keyOf(k+j))), Value: shape.value(k + j)}
				rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
				records = rec.AppendTo(records)
			}
			h := BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastOffsetDelta: int32(perBatch - 1), BaseTimestamp: t0.UnixMilli()}
			batch := encodeBatch(h, 0, h.BaseTimestamp, h.BaseTimestamp+int64(perBatch)-1, int32(perBatch), records)
			if shape.codec != 0 {
				batch = batchtest.Raw(batchtest.Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: h.BaseTimestamp}, shape.codec,
					int32(perBatch), int32(perBatch-1), batchtest.Compress(shape.codec, records))
			}
			if _, err := l.Append(batch, t0); err != nil {
				b.Fatal(err)
			}
		}
		sync(b, l)
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

// BenchmarkCleanRolled: the kaas bench compact scenario's passes, one a
// segment rolled: a partition of 1,667 keys (10,000 over 6 partitions)
// with 100-byte values in 1 MiB segments, each pass cleaning the segment
// that rolled since the last one into the clean head, and installed (the
// file operations are half of such a pass). Beside the pass's CPU it
// reports the install's wall clock (what the partition actor, and the
// appends behind it, wait for) and the fsyncs (of files and of the
// directory) and files created by the pass and by the install.
func BenchmarkCleanRolled(b *testing.B) {
	cfg := testConfig()
	cfg.Compact, cfg.Delete = true, false
	cfg.SegmentBytes = 1 << 20
	cfg.MinCleanableRatio = 0.1
	dir := b.TempDir()
	var counting bool
	var runOps, installOps, ops fileOps
	efs := errorfs.Wrap(vfs.OS)
	efs.Set(func(op errorfs.Op) error {
		if counting {
			ops.count(op)
		}
		return nil
	})
	l, err := Open(durable.Env{FS: efs, DataDir: dir, Logger: quiet}, dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := rand.New(rand.NewPCG(5, 6))
	pool := make([]byte, 1<<20+100)
	_, _ = rand.NewChaCha8([32]byte{2}).Read(pool) // the bench's random values: incompressible
	const perBatch = 100
	now := t0
	var cpu, install time.Duration
	var bytes int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for end := l.active().base; l.active().base == end; {
			var records []byte
			for j := 0; j < perBatch; j++ {
				rec := kmsg.Record{TimestampDelta64: int64(j), OffsetDelta: int32(j), Key: []byte(fmt.Sprintf("key-%d", r.IntN(1667))), Value: pool[r.IntN(1<<20):][:100]}
				rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
				records = rec.AppendTo(records)
			}
			batch := batchtest.Raw(batchtest.Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: now.UnixMilli()}, batchtest.Snappy,
				perBatch, perBatch-1, batchtest.Compress(batchtest.Snappy, records))
			if _, err := l.Append(batch, now); err != nil {
				b.Fatal(err)
			}
		}
		sync(b, l)
		now = now.Add(time.Second)
		p := l.PlanClean(now, l.HighWatermark(), nil, fmt.Sprintf("r%d", i))
		if p == nil {
			b.Fatal("no pass planned")
		}
		// The collections the appends' garbage asks for are not the
		// pass's CPU. Two: a broker under produce collects several times
		// between two passes of a partition (Go's default GOGC, a live
		// heap of tens of MB), and what one collection leaves in a
		// sync.Pool the next takes.
		runtime.GC()
		runtime.GC()
		b.StartTimer()
		c0 := proc.CPU()
		counting, ops = true, fileOps{}
		res, err := p.Run(CleanOptions{MapBytes: 128 << 20})
		if err != nil {
			b.Fatal(err)
		}
		runOps.add(ops)
		ops = fileOps{}
		t := time.Now()
		if _, err := l.InstallCleaned(res, nil); err != nil {
			b.Fatal(err)
		}
		install += time.Since(t)
		installOps.add(ops)
		counting = false
		cpu += proc.CPU() - c0
		bytes += res.Stats.BytesRead
	}
	n := float64(b.N)
	b.SetBytes(bytes / int64(b.N))
	b.ReportMetric(cpu.Seconds()/n*1e3, "cpu-ms/op")
	b.ReportMetric(install.Seconds()/n*1e3, "install-ms/op")
	b.ReportMetric(float64(runOps.syncs)/n, "run-fsyncs/op")
	b.ReportMetric(float64(runOps.opens)/n, "run-opens/op")
	b.ReportMetric(float64(installOps.syncs)/n, "install-fsyncs/op")
	b.ReportMetric(float64(installOps.opens)/n, "install-opens/op")
	b.ReportMetric(float64(installOps.names)/n, "install-renames/op")
}

// fileOps counts a benchmark's fsyncs (of files and directories), file
// opens (a directory opened for its fsync too) and directory entries
// renamed or removed.
type fileOps struct{ syncs, opens, names int }

func (c *fileOps) count(op errorfs.Op) {
	switch op.Kind {
	case errorfs.Sync, errorfs.SyncDir:
		c.syncs++
	case errorfs.Open:
		c.opens++
	case errorfs.Rename, errorfs.Remove:
		c.names++
	}
}

func (c *fileOps) add(o fileOps) {
	c.syncs, c.opens, c.names = c.syncs+o.syncs, c.opens+o.opens, c.names+o.names
}
