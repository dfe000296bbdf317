package partlog

import (
	"fmt"
	"testing"

	"kaas/model/proc"
	"kaas/storage/durable"
)

// BenchmarkAppendSync: one batch appended and fsynced at a time, as every
// acknowledged transactional or acks=all produce is, in a segment
// preallocated with zeros as kaas does (room unless the window outgrew
// it), with room after every batch past it whatever the window, and
// extended by every write. cpu-µs/op is the process's CPU per append and
// fsync, most of it the kernel's fdatasync: the figure preallocation is
// kept for. 100 bytes is a transaction's batch; 16 to 100 KiB are the
// windows one producer at full rate fsyncs, the largest past the room.
// Run on the disk to measure (TMPDIR), e.g.
//
//	go test -run '^$' -bench AppendSync -benchtime 2000x ./storage/partlog
func BenchmarkAppendSync(b *testing.B) {
	for _, size := range []int{100, 16 << 10, 40 << 10, 100 << 10} {
		for _, bc := range []struct {
			name string
			rule int
		}{{"preallocated", roomUnlessLarge}, {"room-always", roomAlways}, {"extending", roomNever}} {
			b.Run(fmt.Sprintf("%dB/%s", size, bc.name), func(b *testing.B) {
				benchAppendSync(b, size, bc.rule)
			})
		}
	}
}

func benchAppendSync(b *testing.B, size, rule int) {
	roomRule = rule
	defer func() { roomRule = roomUnlessLarge }()
	dir := b.TempDir()
	l, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, testConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := batchOf(t0.UnixMilli(), string(make([]byte, size)))
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
}
