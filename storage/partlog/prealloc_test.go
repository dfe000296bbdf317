package partlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
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

// TestNoRoomForAWindowLargerThanIt: a flush window that writes a whole
// room's worth or more extends the file with no zeros after it (its fsync
// extends the file anyway); the next small window gets its room back.
func TestNoRoomForAWindowLargerThanIt(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	small := batchOf(t0.UnixMilli(), "a")
	appendSync(t, l, t0, small)
	var window [][]byte
	for range 3 {
		window = append(window, batchOf(t0.UnixMilli(), strings.Repeat("x", preallocChunk/2)))
	}
	appendSync(t, l, t0, window...)
	size := l.active().size
	if got := int64(len(segmentFile(t, dir, 0))); got != size {
		t.Fatalf("after a window of %d bytes the file is %d bytes, want %d (its batches, no room)", size-int64(len(small)), got, size)
	}
	appendSync(t, l, t0, small)
	data := segmentFile(t, dir, 0)
	size = l.active().size
	if int64(len(data)) < size+preallocChunk || !allZeros(data[size:]) {
		t.Fatalf("after a small window the file is %d bytes for %d of batches: want the room back", len(data), size)
	}
	if got := len(readAll(t, l.View(), 0)); got != 5 {
		t.Fatalf("read %d batches, want 5", got)
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

// roomLeft fails the test if a segment file of dir other than the active
// one (active, -1: none) ends in zeros after its batches: every path that
// makes a segment trusted cuts the room first.
func roomLeft(t *testing.T, dir string, active int64) {
	t.Helper()
	for _, name := range segmentFiles(t, dir) {
		var base int64
		if _, err := fmt.Sscanf(name, "%020d.log", &base); err != nil || base == active {
			continue
		}
		data := segmentFile(t, dir, base)
		if _, err := SplitBatches(data); err != nil {
			t.Fatalf("trusted segment %s does not end at its last batch (%d bytes): %v", name, len(data), err)
		}
	}
}

// TestEveryTrustedSegmentEndsAtItsLastBatch: the roll (segment.bytes),
// retention of an expired active segment, a take-over's seal and a clean
// close each leave the segments they make trusted without room.
func TestEveryTrustedSegmentEndsAtItsLastBatch(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 200
	l := openLog(t, dir, cfg)
	for i := range 6 {
		appendSync(t, l, t0, batchOf(t0.UnixMilli(), fmt.Sprintf("value-%03d", i), "x"))
	}
	if l.SegmentCount() < 3 {
		t.Fatalf("%d segments, want rolls", l.SegmentCount())
	}
	roomLeft(t, dir, l.active().base)
	if a := l.active(); a.alloc <= a.size {
		t.Fatalf("the active segment has no room (%d bytes of %d)", a.size, a.alloc)
	}

	// Retention of an expired active segment rolls it first.
	cfg.RetentionMs = 1
	l.SetConfig(cfg)
	if _, err := l.EnforceRetention(t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	cfg.RetentionMs = -1
	l.SetConfig(cfg)
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "after-retention"))
	roomLeft(t, dir, l.active().base)

	// A take-over seals the previous owner's active segment, room cut.
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "more"))
	crashed := crashCopy(t, dir)
	next := openLog(t, crashed, cfg)
	prev := next.active().base
	if a := next.active(); a.alloc <= a.size {
		t.Fatal("recovery did not keep the room of the crashed log's active segment")
	}
	if err := next.TakeOver(t0, nil); err != nil {
		t.Fatal(err)
	}
	if next.active().base == prev {
		t.Fatal("the take-over did not roll")
	}
	roomLeft(t, crashed, next.active().base)

	// A clean close cuts the active segment's room too.
	appendSync(t, next, t0, batchOf(t0.UnixMilli(), "new owner"))
	want := next.EndOffset()
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	roomLeft(t, crashed, -1)
	reopened := openLog(t, crashed, cfg)
	if got := reopened.EndOffset(); got != want {
		t.Fatalf("end offset %d after a clean close, want %d", got, want)
	}
}

// TestCloseUnderAClosedGateWritesNothing: a close whose lease gate is
// closed (a cluster broker whose lease fell in doubt) leaves the files as
// they were — room uncut, no recovery point moved, no clean-shutdown
// marker — and says so; the next start recovers through the room.
func TestCloseUnderAClosedGateWritesNothing(t *testing.T) {
	for _, name := range []string{"at once", "before the marker"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig())
			appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a", "b"))
			before := segmentFile(t, dir, 0)
			calls := 0
			gate := func() bool {
				calls++
				return name == "before the marker" && calls == 1
			}
			if err := l.CloseUnder(gate); !errors.Is(err, ErrClosedInDoubt) {
				t.Fatalf("CloseUnder with the gate closed: %v, want ErrClosedInDoubt", err)
			}
			if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err == nil {
				t.Fatal("a close with its gate closed left a clean-shutdown marker")
			}
			if name == "at once" && len(segmentFile(t, dir, 0)) != len(before) {
				t.Fatal("a close with its gate closed cut the room")
			}
			r := openLog(t, dir, testConfig())
			if r.EndOffset() != 2 {
				t.Fatalf("end offset %d, want 2", r.EndOffset())
			}
		})
	}
}

// TestADeposedOwnersCleanMarkerVouchesForNothing: a broker paused after
// its close's last lease check resumes once a peer took the partition
// over and writes its marker into the peer's directory. The marker names
// the deposed owner's segment, so the next start does not trust the
// peer's active segment: its room is kept and a torn tail is cut, where
// trusting it refused the partition as corrupt (the chaos run's failure).
func TestADeposedOwnersCleanMarkerVouchesForNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	deposed := openLog(t, dir, cfg)
	appendSync(t, deposed, t0, batchOf(t0.UnixMilli(), "deposed"))

	peer := openLog(t, dir, cfg)
	if err := peer.TakeOver(t0, nil); err != nil {
		t.Fatal(err)
	}
	appendSync(t, peer, t0, batchOf(t0.UnixMilli(), "peer", "acknowledged"))
	if err := deposed.Close(); err != nil { // its gate said yes before the pause
		t.Fatal(err)
	}
	// The peer crashes mid-write: a torn batch in its room.
	a := peer.active()
	torn := batchOf(t0.UnixMilli(), "torn")
	if _, err := a.log.WriteAt(torn[:len(torn)/2], a.size); err != nil {
		t.Fatal(err)
	}
	peer.Abandon()

	r, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, cfg)
	if err != nil {
		t.Fatalf("the next owner could not open the partition: %v", err)
	}
	defer r.Close()
	if r.EndOffset() != 3 {
		t.Fatalf("end offset %d, want 3 (the peer's acknowledged batch kept, the torn one cut)", r.EndOffset())
	}
	if got := fmt.Sprint(readAll(t, r.View(), 0)); got != "[0 1]" {
		t.Fatalf("batches %v, want [0 1]", got)
	}
}

// TestZerosInATrustedSegmentAreCut: should a close ever leave room under
// a marker that vouches for it, the zeros are cut with a warning rather
// than refused as corruption: they hold no batch anyone was told about.
func TestZerosInATrustedSegmentAreCut(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a", "b"))
	size := l.active().size
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The room such a close would have left, and a marker naming it.
	path := segmentPath(dir, 0, logSuffix)
	if err := os.Truncate(path, size+preallocChunk); err != nil {
		t.Fatal(err)
	}
	if err := markCleanShutdown(vfs.OS, dir, cleanMarker{base: 0, size: size + preallocChunk}); err != nil {
		t.Fatal(err)
	}
	r := openLog(t, dir, testConfig())
	if r.EndOffset() != 2 {
		t.Fatalf("end offset %d, want 2", r.EndOffset())
	}
	if got := fileSize(t, path); got != size {
		t.Fatalf("segment is %d bytes after opening, want %d (the zeros cut)", got, size)
	}
	if h := appendSync(t, r, t0, batchOf(t0.UnixMilli(), "c")); h[0].BaseOffset != 2 {
		t.Fatalf("next append at %d, want 2", h[0].BaseOffset)
	}
}

// TestPreallocateRefusesAFileSomeoneElseWrites: the room is written only
// after a batch that went past it, when the file must end at that batch.
// A file longer than that is another owner's (a deposed owner's reopen
// that found the new owner's segment at the path): the zeros would
// overwrite its records, so the append fails and the log goes offline.
func TestPreallocateRefusesAFileSomeoneElseWrites(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a"))
	path := segmentPath(dir, 0, logSuffix)
	other := bytes.Repeat([]byte{7}, 3*preallocChunk)
	if err := os.WriteFile(path, other, 0o644); err != nil { // the same inode, rewritten
		t.Fatal(err)
	}
	big := batchOf(t0.UnixMilli(), strings.Repeat("x", 2*preallocChunk))
	if _, err := l.Append(big, t0); !errors.Is(err, ErrSegmentReplaced) {
		t.Fatalf("append past the room of a file someone else wrote: %v, want ErrSegmentReplaced", err)
	}
	if l.Failed() == nil {
		t.Fatal("the log is not offline after the refused room")
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The late batch itself overwrote its length; nothing after it moved.
	end := l.active().size
	if len(got) != len(other) || !bytes.Equal(got[end:], other[end:]) {
		t.Fatalf("the other owner's file is %d bytes (was %d), changed after the late batch's end %d: zeros over its records", len(got), len(other), end)
	}
}
