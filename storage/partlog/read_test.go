package partlog

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Read walks a segment in chunks: asking for 2 GiB from the start of an
// 8 MiB segment when only its first batch is below upTo (a read_committed
// fetch behind an open transaction) allocates about what it returns, not
// the rest of the segment (issue 9 row 8: one fetch with MaxBytes 2³¹−1
// over a 182 MB segment grew RSS by 530 MB; fetch.max.bytes caps what a
// fetch may ask for).
func TestReadAllocatesWhatItReturns(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	big := strings.Repeat("x", 64<<10)
	now := time.Now()
	for i := 0; i < 128; i++ {
		appendSync(t, l, now, batchOf(now.UnixMilli(), big))
	}
	v := l.View()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	data, err := v.Read(0, 1<<31-1, 1)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := SplitBatches(data)
	if err != nil || len(batches) != 1 {
		t.Fatalf("read %d batches (%v), want the first one", len(batches), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2<<20 {
		t.Fatalf("reading one %d-byte batch with a 2 GiB limit allocated %d bytes", len(data), alloc)
	}
}

// Read stops at maxBytes and at upTo, and returns the first batch whole
// even when it alone is larger than maxBytes (KIP-74).
func TestReadLimits(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	now := time.Now()
	value := strings.Repeat("y", 300<<10) // batches of ~300 KiB: several read chunks
	var hs []BatchHeader
	for i := 0; i < 10; i++ {
		hs = append(hs, appendSync(t, l, now, batchOf(now.UnixMilli(), value))...)
	}
	v := l.View()
	size := int(hs[0].Size())
	for _, tc := range []struct {
		name     string
		from     int64
		maxBytes int32
		upTo     int64
		want     int
	}{
		{"under maxBytes", 0, int32(3*size + size/2), v.HighWatermark, 3},
		{"first batch over maxBytes", 2, 100, v.HighWatermark, 1},
		{"up to upTo", 1, 1 << 30, 6, 5},
		{"everything", 0, 1 << 30, v.HighWatermark, 10},
	} {
		data, err := v.Read(tc.from, tc.maxBytes, tc.upTo)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		batches, err := SplitBatches(data)
		if err != nil || len(batches) != tc.want {
			t.Fatalf("%s: %d batches (%v), want %d", tc.name, len(batches), err, tc.want)
		}
		if h, _ := ParseBatchHeader(batches[0]); h.BaseOffset != tc.from {
			t.Fatalf("%s: first batch at %d, want %d", tc.name, h.BaseOffset, tc.from)
		}
	}
}
