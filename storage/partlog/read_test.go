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

// ReadPooled returns what Read returns, from buffers that, once
// released, later reads reuse without touching what an earlier read
// returned before its release; growing across read chunks (batches of
// ~300 KiB, limits over 1 MiB) keeps the bytes already read.
func TestReadPooledMatchesRead(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	now := time.Now()
	for i := 0; i < 12; i++ {
		appendSync(t, l, now, batchOf(now.UnixMilli(), strings.Repeat(string(rune('a'+i)), 300<<10)))
	}
	v := l.View()
	for _, maxBytes := range []int32{1, 64 << 10, 700 << 10, 3 << 20, 8 << 20} {
		for from := int64(0); from < v.HighWatermark; from += 5 {
			want, err := v.Read(from, maxBytes, v.HighWatermark)
			if err != nil {
				t.Fatal(err)
			}
			got, pb, err := v.ReadPooled(from, maxBytes, v.HighWatermark)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("from %d, maxBytes %d: ReadPooled returned %d bytes unlike Read's %d", from, maxBytes, len(got), len(want))
			}
			held := string(got)
			other, opb, _ := v.ReadPooled(v.HighWatermark-1, maxBytes, v.HighWatermark)
			if string(got) != held || len(other) == 0 {
				t.Fatalf("from %d: a second read changed the first one's bytes before its release", from)
			}
			opb.Release()
			pb.Release()
		}
	}
}

// A read finds the batch holding its offset whether it is one of the
// last few appended (remembered by the view, no header walk), older, or
// appended but not yet below the high watermark (never returned).
func TestReadFindsRecentAndOlderBatches(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	now := time.Now()
	for i := 0; i < 20; i++ {
		values := make([]string, 1+i%3) // batches of 1 to 3 records
		for j := range values {
			values[j] = strings.Repeat("z", 100+i)
		}
		appendSync(t, l, now, batchOf(now.UnixMilli(), values...))
	}
	// Appended and published, not synced: beyond what readers may see
	// though the view remembers it.
	if _, err := l.Append(batchOf(now.UnixMilli(), "unsynced"), now); err != nil {
		t.Fatal(err)
	}
	l.Publish(l.HighWatermark())
	v := l.View()
	for o := int64(0); o < v.HighWatermark; o++ {
		data, err := v.Read(o, 1, v.HighWatermark)
		if err != nil {
			t.Fatal(err)
		}
		batches, err := SplitBatches(data)
		if err != nil || len(batches) != 1 {
			t.Fatalf("offset %d: %d batches (%v)", o, len(batches), err)
		}
		h, _ := ParseBatchHeader(batches[0])
		if h.BaseOffset > o || h.LastOffset() < o {
			t.Fatalf("offset %d: read batch %d-%d", o, h.BaseOffset, h.LastOffset())
		}
	}
	if data, err := v.Read(v.HighWatermark, 1<<20, v.HighWatermark+10); err != nil || len(data) != 0 {
		t.Fatalf("reading at the high watermark returned %d bytes (%v)", len(data), err)
	}
}
