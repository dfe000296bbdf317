package slotlog

import (
	"bytes"
	"path/filepath"
	"testing"
)

// BenchmarkAppend: one 300-byte record appended at a time to a
// preallocated log (a TV2 transaction's coordinator record), for the
// allocations per append (the frame buffer is reused).
func BenchmarkAppend(b *testing.B) {
	dir := b.TempDir()
	l, err := Open(env(dir), "bench log", filepath.Join(dir, "slot.log"), func(Frame) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	l.Preallocate()
	payload := bytes.Repeat([]byte("x"), 300)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := l.Append(payload); err != nil {
			b.Fatal(err)
		}
	}
}
