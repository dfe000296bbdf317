package partlog

import (
	"testing"

	"kaas/model/proc"
	"kaas/storage/durable"
)

// BenchmarkAppendSync: one 100-byte batch appended and fsynced at a time,
// as every acknowledged transactional or acks=all produce is, in a
// segment preallocated with zeros (the default) and in one extended by
// every write. cpu-µs/op is the process's CPU per append and fsync, most
// of it the kernel's fdatasync: the figure preallocation is kept for.
// Run on the disk to measure (TMPDIR), e.g.
//
//	go test -run '^$' -bench AppendSync -benchtime 2000x ./storage/partlog
func BenchmarkAppendSync(b *testing.B) {
	for _, bc := range []struct {
		name string
		pre  bool
	}{{"preallocated", true}, {"extending", false}} {
		b.Run(bc.name, func(b *testing.B) {
			preallocating = bc.pre
			defer func() { preallocating = true }()
			dir := b.TempDir()
			l, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, testConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			batch := batchOf(t0.UnixMilli(), string(make([]byte, 100)))
			buf := make([]byte, len(batch))
			b.ResetTimer()
			cpu := proc.CPU()
			for i := 0; i < b.N; i++ {
				copy(buf, batch)
				if _, err := l.Append(buf, t0); err != nil {
					b.Fatal(err)
				}
				j := l.PrepareSync()
				if err := j.Run(); err != nil {
					b.Fatal(err)
				}
				l.Advance(j)
			}
			b.ReportMetric(float64((proc.CPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
