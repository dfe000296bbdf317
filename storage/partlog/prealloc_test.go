package partlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// segmentFile is the bytes of segment base's log file in dir.
func segmentFile(t *testing.T, dir string, base int64) []byte {
	t.Helper()
	b, err := os.ReadFile(segmentPath(dir, base, logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPreallocatedRoom: the active segment's file runs ahead of its
// batches with zeros; after a crash recovery keeps them as room (the log
// ends at the last batch, the next append lands right after it), and a
// rolled or cleanly closed segment ends exactly at its last batch.
func TestPreallocatedRoom(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	a, b := batchOf(t0.UnixMilli(), "a", "a"), batchOf(t0.UnixMilli(), "b")
	appendSync(t, l, t0, a, b)
	data := segmentFile(t, dir, 0)
	size := len(a) + len(b)
	if len(data) < size+preallocChunk || len(data)%4096 != 0 || !allZeros(data[size:]) {
		t.Fatalf("segment file is %d bytes for %d of batches: want zeros to a page boundary %d bytes past them", len(data), size, preallocChunk)
	}

	crashed := crashCopy(t, dir)
	r := openLog(t, crashed, testConfig())
	if got := len(segmentFile(t, crashed, 0)); got != len(data) {
		t.Fatalf("recovery changed the file from %d to %d bytes (the room should stay)", len(data), got)
	}
	if r.EndOffset() != 3 {
		t.Fatalf("recovered end offset %d, want 3 (zeros are never data)", r.EndOffset())
	}
	c := batchOf(t0.UnixMilli(), "c")
	if h := appendSync(t, r, t0, c); h[0].BaseOffset != 3 {
		t.Fatalf("append after recovery at %d, want 3", h[0].BaseOffset)
	}
	after := segmentFile(t, crashed, 0)
	if len(after) != len(data) || !allZeros(after[size+len(c):]) {
		t.Fatalf("the append did not land in the room: file %d bytes (was %d)", len(after), len(data))
	}
	if got := fmt.Sprint(readAll(t, r.View(), 0)); got != "[0 2 3]" {
		t.Fatalf("batches %v, want [0 2 3]", got)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(segmentFile(t, crashed, 0)); got != size+len(c) {
		t.Fatalf("cleanly closed segment is %d bytes, want %d (its batches only: a trusted segment holds no room)", got, size+len(c))
	}
	r = openLog(t, crashed, testConfig())
	if r.EndOffset() != 4 {
		t.Fatalf("end offset %d after a clean reopen, want 4", r.EndOffset())
	}

	// A roll seals the segment at its last batch; the new one gets room.
	cfg := testConfig()
	cfg.SegmentBytes = int64(size + len(c))
	r.SetConfig(cfg)
	appendSync(t, r, t0, batchOf(t0.UnixMilli(), "d"))
	if got := len(segmentFile(t, crashed, 0)); got != size+len(c) {
		t.Fatalf("rolled segment is %d bytes, want %d", got, size+len(c))
	}
	if got := segmentFile(t, crashed, 4); len(got) < preallocChunk {
		t.Fatalf("new active segment is %d bytes, want room after its batch", len(got))
	}
}

// TestTakeOverRefusesAnAppendInTheRoom: an append that lands in the
// preallocated room leaves the file's length as it was; a take-over whose
// recovery read the file before it must still see that the segment moved
// on, and refuse (sealing it would cut the acknowledged batch).
func TestTakeOverRefusesAnAppendInTheRoom(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	owner := openLog(t, dir, cfg)
	appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "first"))
	before := len(segmentFile(t, dir, 0))
	stale := openLog(t, dir, cfg)
	appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "acknowledged"))
	if got := len(segmentFile(t, dir, 0)); got != before {
		t.Fatalf("the append changed the file's length %d -> %d; this test needs it to land in the room", before, got)
	}
	if err := stale.TakeOver(t0, nil); !errors.Is(err, ErrStaleTakeOver) {
		t.Fatalf("TakeOver after an append in the room: %v, want ErrStaleTakeOver", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%020d%s", 0, sealSuffix))); err == nil {
		t.Fatal("the stale take-over sealed the segment")
	}
}
