package partlog

import (
	"fmt"
	"runtime"
	"testing"
)

// TestOffsetMapBounded: the pass's key map keeps the latest offset of
// every key it takes, compares keys by their bytes, and never allocates
// past its budget except for a forced put (a pass's first batch).
func TestOffsetMapBounded(t *testing.T) {
	const budget = 64 << 10
	m := newOffsetMap(budget, 1_000_000)
	taken := 0
	for i := 0; ; i++ {
		if !m.put([]byte(fmt.Sprintf("key-%d", i)), int64(i), false) {
			break
		}
		taken++
	}
	if m.used > budget {
		t.Fatalf("map allocated %d bytes, budget %d", m.used, budget)
	}
	if taken < budget/(mapEntryOverhead+12) {
		t.Fatalf("only %d keys in %d bytes", taken, budget)
	}
	// Updates of keys already in always fit, and keep the latest offset.
	for i := 0; i < taken; i++ {
		if !m.put([]byte(fmt.Sprintf("key-%d", i)), int64(10*i+5), false) || !m.put([]byte(fmt.Sprintf("key-%d", i)), int64(i), false) {
			t.Fatalf("update of key-%d refused", i)
		}
	}
	for i := 0; i < taken; i++ {
		if off, ok := m.get([]byte(fmt.Sprintf("key-%d", i))); !ok || off != int64(10*i+5) {
			t.Fatalf("key-%d: %d %v, want %d", i, off, ok, 10*i+5)
		}
	}
	for i := 0; i < taken; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		if !m.isLatest(k, int64(10*i+5)) || m.isLatest(k, int64(10*i+4)) || !m.isLatest(k, int64(10*i+6)) {
			t.Fatalf("key-%d: isLatest wrong around its offset %d", i, 10*i+5)
		}
	}
	if !m.isLatest([]byte("not-mapped"), 0) {
		t.Fatal("a key not mapped is not its own latest")
	}
	if _, ok := m.get([]byte(fmt.Sprintf("key-%d", taken))); ok {
		t.Fatal("a key refused is found")
	}
	if m.len() != taken {
		t.Fatalf("len %d, want %d", m.len(), taken)
	}
	// A forced put always succeeds, growing the map.
	for i := taken; i < taken+1000; i++ {
		if !m.put([]byte(fmt.Sprintf("key-%d", i)), int64(i), true) {
			t.Fatal("forced put refused")
		}
	}
	if off, ok := m.get([]byte(fmt.Sprintf("key-%d", taken+999))); !ok || off != int64(taken+999) {
		t.Fatal("forced key lost")
	}
	// A map sized for few keys allocates for those only.
	if small := newOffsetMap(budget, 10); small.used > 16*mapSlotBytes {
		t.Fatalf("a map for 10 keys allocated %d bytes", small.used)
	}
}

// TestPassBuffersOutliveCollections: a pass's buffers are there for the
// next pass however many collections ran between them (a sync.Pool's
// were gone after two), and no more than maxKeptPassBuffers sets are kept.
func TestPassBuffersOutliveCollections(t *testing.T) {
	var sets []*passBuffers
	for range maxKeptPassBuffers + 1 {
		b := getPassBuffers()
		b.rbuf = make([]byte, 0, cleanReadBytes)
		sets = append(sets, b)
	}
	for _, b := range sets {
		putPassBuffers(b)
	}
	runtime.GC()
	runtime.GC()
	for range maxKeptPassBuffers {
		if b := getPassBuffers(); cap(b.rbuf) != cleanReadBytes {
			t.Fatal("a pass's buffers were dropped between passes")
		}
	}
	if b := getPassBuffers(); b.rbuf != nil {
		t.Fatalf("more than %d sets of buffers kept", maxKeptPassBuffers)
	}
}
