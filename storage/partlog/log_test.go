package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/partlog/batchtest"
)

var t0 = time.UnixMilli(1_700_000_000_000)

// TestRollBySegmentBytes: a batch that would take the active segment past
// segment.bytes starts a new one, named by its 20-digit base offset; a
// batch larger than segment.bytes still lands (alone) in a segment.
func TestRollBySegmentBytes(t *testing.T) {
	dir := t.TempDir()
	batch := batchOf(t0.UnixMilli(), "aaaa", "bbbb") // 2 offsets
	cfg := testConfig()
	cfg.SegmentBytes = int64(len(batch))*2 + int64(len(batch))/2
	l := openLog(t, dir, cfg)
	appendSync(t, l, t0, batch, batch, batch, batch, batch)
	want := []string{"00000000000000000000.log", "00000000000000000004.log", "00000000000000000008.log"}
	if got := segmentFiles(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("segments %v, want %v", got, want)
	}
	if l.SegmentCount() != 3 || l.EndOffset() != 10 {
		t.Fatalf("%d segments ending at %d", l.SegmentCount(), l.EndOffset())
	}
	big := batchOf(t0.UnixMilli(), strings.Repeat("x", int(cfg.SegmentBytes)))
	appendSync(t, l, t0, big, batch)
	if l.SegmentCount() != 5 {
		t.Fatalf("%d segments after an oversize batch, want 5 (it rolls before and after)", l.SegmentCount())
	}
	if got := readAll(t, l.View(), 0); fmt.Sprint(got) != "[0 2 4 6 8 10 11]" {
		t.Fatalf("batches %v", got)
	}
}

// TestRollBySegmentMs: segment.ms compares the incoming batch's timestamp
// with the segment's first batch's (Apache's rollingBasedTimestamp), so
// the age survives a restart and no wall-clock waiting is involved.
func TestRollBySegmentMs(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentMs = 1000
	l := openLog(t, dir, cfg)
	ts := t0.UnixMilli()
	appendSync(t, l, t0, batchOf(ts, "a"), batchOf(ts+600, "b"), batchOf(ts+1000, "c"))
	if l.SegmentCount() != 1 {
		t.Fatalf("rolled before segment.ms passed: %d segments", l.SegmentCount())
	}
	appendSync(t, l, t0, batchOf(ts+1001, "d"))
	if l.SegmentCount() != 2 {
		t.Fatalf("%d segments, want a roll once a batch is more than segment.ms newer", l.SegmentCount())
	}
	// The new segment's clock starts at its own first batch, also across
	// a restart.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	appendSync(t, l, t0, batchOf(ts+2001, "e"))
	if l.SegmentCount() != 2 {
		t.Fatalf("rolled %d ms after the segment's first batch", 1000)
	}
	appendSync(t, l, t0, batchOf(ts+2002, "f"))
	if l.SegmentCount() != 3 {
		t.Fatalf("%d segments after reopening, want a roll", l.SegmentCount())
	}
}

// TestRetentionByTime deletes whole segments whose newest record is older
// than retention.ms and moves the log start; like Apache it also deletes
// an expired active segment, rolling an empty one in its place.
func TestRetentionByTime(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.RetentionMs = 60_000
	l := openLog(t, dir, cfg)
	now := t0
	appendSync(t, l, now, batchOf(now.Add(-3*time.Minute).UnixMilli(), "old", "old"))
	l.roll(now)
	appendSync(t, l, now, batchOf(now.Add(-2*time.Minute).UnixMilli(), "old"))
	l.roll(now)
	appendSync(t, l, now, batchOf(now.Add(-30*time.Second).UnixMilli(), "new"))
	n, err := l.EnforceRetention(now)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d segments (%v), want 2", n, err)
	}
	if l.LogStartOffset() != 3 || l.SegmentCount() != 1 {
		t.Fatalf("log start %d with %d segments, want 3 and 1", l.LogStartOffset(), l.SegmentCount())
	}
	if got := segmentFiles(t, dir); len(got) != 1 || got[0] != "00000000000000000003.log" {
		t.Fatalf("files %v", got)
	}
	l.Publish(l.HighWatermark())
	if _, err := l.View().Read(0, 1<<20, 4); err != ErrOffsetOutOfRange {
		t.Fatalf("reading below the log start: %v", err)
	}

	// A minute later the active segment has expired too.
	n, err = l.EnforceRetention(now.Add(31 * time.Second))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want the expired active segment", n, err)
	}
	if l.LogStartOffset() != 4 || l.EndOffset() != 4 || l.SegmentCount() != 1 {
		t.Fatalf("log start %d, end %d, %d segments; want an empty log at 4", l.LogStartOffset(), l.EndOffset(), l.SegmentCount())
	}
	// An empty active segment is never deleted, and offsets continue.
	if n, _ := l.EnforceRetention(now.Add(time.Hour)); n != 0 {
		t.Fatalf("deleted %d empty segments", n)
	}
	if h := appendSync(t, l, now, batchOf(now.UnixMilli(), "next")); h[0].BaseOffset != 4 {
		t.Fatalf("next batch at %d, want 4", h[0].BaseOffset)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	if l.LogStartOffset() != 4 || l.EndOffset() != 5 {
		t.Fatalf("after reopening: log start %d, end %d", l.LogStartOffset(), l.EndOffset())
	}
}

// TestRetentionByBytes deletes the oldest whole segments while the rest
// still holds at least retention.bytes.
func TestRetentionByBytes(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	batch := batchOf(t0.UnixMilli(), "0123456789")
	for i := 0; i < 4; i++ {
		appendSync(t, l, t0, batch)
		l.roll(t0)
	}
	size := int64(len(batch))
	for _, tc := range []struct {
		retention int64
		deleted   int
		start     int64
	}{
		// Four full segments and an empty active one; each step starts
		// where the previous left off. Apache's rule: delete the oldest
		// while what remains without it is still ≥ retention.bytes.
		{-1, 0, 0},
		{4 * size, 0, 0},
		{3*size - 1, 1, 1},
		{3 * size, 0, 1},
		{size + 1, 1, 2},
		{0, 2, 4}, // everything; the empty active segment stays
	} {
		cfg := testConfig()
		cfg.RetentionBytes = tc.retention
		l.SetConfig(cfg)
		n, err := l.EnforceRetention(t0)
		if err != nil || n != tc.deleted || l.LogStartOffset() != tc.start {
			t.Fatalf("retention.bytes %d: deleted %d (%v), log start %d; want %d and %d", tc.retention, n, err, l.LogStartOffset(), tc.deleted, tc.start)
		}
	}
}

// TestRetentionKeepsWhatIsNotDurable: a segment holding bytes above the
// high watermark is never deleted, however old.
func TestRetentionKeepsWhatIsNotDurable(t *testing.T) {
	cfg := testConfig()
	cfg.RetentionMs = 1
	l := openLog(t, t.TempDir(), cfg)
	old := batchOf(t0.Add(-time.Hour).UnixMilli(), "x")
	appendSync(t, l, t0, old)
	l.roll(t0)
	if _, err := l.Append(append([]byte(nil), old...), t0); err != nil { // not synced
		t.Fatal(err)
	}
	n, err := l.EnforceRetention(t0)
	if err != nil || n != 1 || l.LogStartOffset() != 1 || l.SegmentCount() != 1 {
		t.Fatalf("deleted %d (%v), log start %d, %d segments; want only the durable segment gone", n, err, l.LogStartOffset(), l.SegmentCount())
	}
}

// TestDeleteRecordsBefore moves the log start, drops the segments wholly
// below it (never the active one), refuses offsets past the high
// watermark, and persists the start across a restart.
func TestDeleteRecordsBefore(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openLog(t, dir, cfg)
	for i := 0; i < 3; i++ {
		appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a", "b")) // offsets 2i, 2i+1
		l.roll(t0)
	}
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "c")) // offset 6, active segment
	if err := l.DeleteRecordsBefore(8, nil); err != ErrOffsetOutOfRange {
		t.Fatalf("past the high watermark: %v", err)
	}
	if err := l.DeleteRecordsBefore(3, nil); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 3 || l.SegmentCount() != 3 {
		t.Fatalf("log start %d with %d segments, want 3 with 3", l.LogStartOffset(), l.SegmentCount())
	}
	if err := l.DeleteRecordsBefore(1, nil); err != nil || l.LogStartOffset() != 3 {
		t.Fatalf("moving the start backwards: %v, start %d", err, l.LogStartOffset())
	}
	l.Publish(l.HighWatermark())
	if _, err := l.View().Read(2, 1<<20, 7); err != ErrOffsetOutOfRange {
		t.Fatalf("read below the start: %v", err)
	}
	if got := readAll(t, l.View(), 3); fmt.Sprint(got) != "[2 4 6]" {
		t.Fatalf("batches from 3: %v (the batch holding 3 starts at 2)", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	if l.LogStartOffset() != 3 {
		t.Fatalf("after reopening the log starts at %d, want 3", l.LogStartOffset())
	}
	if err := l.DeleteRecordsBefore(7, nil); err != nil || l.LogStartOffset() != 7 || l.SegmentCount() != 1 {
		t.Fatalf("up to the high watermark: %v, start %d, %d segments", err, l.LogStartOffset(), l.SegmentCount())
	}
	if h := appendSync(t, l, t0, batchOf(t0.UnixMilli(), "d")); h[0].BaseOffset != 7 {
		t.Fatalf("next offset %d", h[0].BaseOffset)
	}
}

// TestDeleteRecordsInDoubtKeepsSegments: a log start made durable once
// the gate says no is reported ErrLogStartInDoubt, and no segment is
// removed for it (a peer may own the files now).
func TestDeleteRecordsInDoubtKeepsSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	l := openLog(t, dir, cfg)
	for i := 0; i < 2; i++ {
		appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a", "b")) // offsets 2i, 2i+1
		l.roll(t0)
	}
	if err := l.DeleteRecordsBefore(4, func() bool { return false }); err != ErrLogStartInDoubt {
		t.Fatalf("log start written under a closed gate: %v, want ErrLogStartInDoubt", err)
	}
	if l.SegmentCount() != 3 {
		t.Fatalf("%d segments after a DeleteRecords in doubt, want all 3 kept", l.SegmentCount())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l = openLog(t, dir, cfg); l.LogStartOffset() != 4 {
		t.Fatalf("after reopening the log starts at %d, want 4 (the checkpoint is durable)", l.LogStartOffset())
	}
}

// TestHighWatermarkCoversOnlySyncedBytes: appends are invisible to readers
// until the sync that covers them is advanced and published.
func TestHighWatermarkCoversOnlySyncedBytes(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	appendSync(t, l, t0, batchOf(t0.UnixMilli(), "a"))
	before := l.View()
	if _, err := l.Append(batchOf(t0.UnixMilli(), "b"), t0); err != nil {
		t.Fatal(err)
	}
	job := l.PrepareSync()
	if job == nil || job.UpTo() != 2 {
		t.Fatalf("sync job up to %v", job)
	}
	if _, err := l.Append(batchOf(t0.UnixMilli(), "c"), t0); err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() != 1 || l.EndOffset() != 3 {
		t.Fatalf("high watermark %d, end %d before the fsync", l.HighWatermark(), l.EndOffset())
	}
	if err := job.Run(); err != nil {
		t.Fatal(err)
	}
	l.Advance(job)
	l.Publish(l.HighWatermark())
	select {
	case <-before.Changed():
	default:
		t.Fatal("publishing did not signal the previous view (long polls would not wake)")
	}
	v := l.View()
	if v.HighWatermark != 2 {
		t.Fatalf("high watermark %d after the sync, want 2 (the third batch is not covered)", v.HighWatermark)
	}
	if got := readAll(t, v, 0); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("visible batches %v", got)
	}
	if data, _ := v.Read(2, 1<<20, 3); len(data) != 0 {
		t.Fatal("a reader saw a batch above the high watermark")
	}
}

// crashCopy copies a live log directory as a crash would leave it (the
// bytes written so far, no clean-shutdown marker) to a new directory.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == cleanShutdownFile {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRecoveryTruncatesTornTail: after a crash the active segment is
// scanned, and whatever follows the last whole, CRC-valid batch is cut
// off; the log then takes new writes at the next offset.
func TestRecoveryTruncatesTornTail(t *testing.T) {
	a := batchOf(t0.UnixMilli(), "first", "first")
	b := batchOf(t0.UnixMilli(), "second")
	c := batchOf(t0.UnixMilli(), "third", "third", "third")
	whole := int64(len(a) + len(b))
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"cut inside the length prefix", truncateTo(whole + 5)},
		{"cut inside the header", truncateTo(whole + 30)},
		{"cut inside the records", truncateTo(whole + int64(len(c)) - 3)},
		{"corrupt CRC", flipByteAt(whole + int64(len(c)) - 1)},
		{"zeroed tail (preallocated or lost pages)", zeroFrom(whole)},
		{"garbage after the last batch", appendBytes([]byte("\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x01\x00garbage"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig())
			appendSync(t, l, t0, a, b, c)
			crashed := crashCopy(t, dir)
			path := filepath.Join(crashed, "00000000000000000000.log")
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			r := openLog(t, crashed, testConfig())
			wantEnd, wantSize := int64(3), whole
			if tc.name == "garbage after the last batch" {
				wantEnd, wantSize = 6, whole+int64(len(c))
			}
			if r.EndOffset() != wantEnd || r.HighWatermark() != wantEnd {
				t.Fatalf("recovered end %d, high watermark %d, want %d", r.EndOffset(), r.HighWatermark(), wantEnd)
			}
			// Zeros after the last whole batch may stay, as room for the
			// next appends (segment.go: preallocChunk).
			if got, err := os.ReadFile(path); err != nil || int64(len(got)) < wantSize || !allZeros(got[wantSize:]) {
				t.Fatalf("segment is %d bytes after recovery (%v), want %d (the last whole batch) and zeros at most", len(got), err, wantSize)
			}
			h := appendSync(t, r, t0, batchOf(t0.UnixMilli(), "after"))
			if h[0].BaseOffset != wantEnd {
				t.Fatalf("next batch at %d, want %d", h[0].BaseOffset, wantEnd)
			}
			want := "[0 2 3]"
			if wantEnd == 6 {
				want = "[0 2 3 6]"
			}
			if got := readAll(t, r.View(), 0); fmt.Sprint(got) != want {
				t.Fatalf("batches %v, want %v", got, want)
			}
		})
	}
}

// TestSealedSegmentDamageRefusesToStart is issue 9 row 2: a flipped byte
// in an old segment used to make recovery delete every later segment (and
// reuse their offsets). Rolls fsync a segment before the next exists, so
// damage in a sealed segment is never a crash's torn tail: Open refuses,
// naming the file and the byte offset, and changes nothing; with
// SkipCorrupt the segment goes to quarantine and the log keeps every later
// segment and its end offset.
func TestSealedSegmentDamageRefusesToStart(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, testConfig())
			batch := batchOf(t0.UnixMilli(), "x", "y")
			appendSync(t, l, t0, batch, batch)
			l.roll(t0)
			appendSync(t, l, t0, batch, batch)
			l.roll(t0)
			appendSync(t, l, t0, batch)
			if clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				dir = crashCopy(t, dir)
			}
			first := filepath.Join(dir, "00000000000000000000.log")
			// The last batch of the first segment: read by every start.
			at := int64(len(batch)) + 40
			if err := flipByteAt(at)(first); err != nil {
				t.Fatal(err)
			}
			before := dirSizes(t, dir)
			_, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, testConfig())
			var cerr *durable.CorruptError
			if !errors.As(err, &cerr) || cerr.Path != first || cerr.Offset != int64(len(batch)) {
				t.Fatalf("Open: %v, want a CorruptError for %s at byte %d", err, first, len(batch))
			}
			if after := dirSizes(t, dir); after != before {
				t.Fatalf("a refused start changed the directory:\n%s\nwas\n%s", after, before)
			}

			r, err := Open(durable.Env{DataDir: dir, Logger: quiet, SkipCorrupt: true}, dir, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			if r.EndOffset() != 10 || r.LogStartOffset() != 4 || r.SegmentCount() != 2 {
				t.Fatalf("after quarantine: end %d, start %d, %d segments; want 10, 4, 2", r.EndOffset(), r.LogStartOffset(), r.SegmentCount())
			}
			moved, _ := filepath.Glob(filepath.Join(dir, durable.QuarantineDir, "*", "00000000000000000000.log"))
			if len(moved) != 1 {
				t.Fatalf("quarantined files: %v", moved)
			}
			if got := readAll(t, r.View(), 4); fmt.Sprint(got) != "[4 6 8]" {
				t.Fatalf("batches %v", got)
			}
			if h := appendSync(t, r, t0, batch); h[0].BaseOffset != 10 {
				t.Fatalf("next batch at %d, want 10 (offsets are never reused)", h[0].BaseOffset)
			}
		})
	}
}

// TestQuarantinedLastSegmentNeverReusesOffsets: when the damaged segment is
// the last one, the log continues after the highest offset any intact
// batch in it held, past the damage too.
func TestQuarantinedLastSegmentNeverReusesOffsets(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	batch := batchOf(t0.UnixMilli(), "x", "y")
	appendSync(t, l, t0, batch, batch, batch)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the second batch (clean shutdown: all of it was durable).
	if err := flipByteAt(int64(len(batch)) + 40)(filepath.Join(dir, "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	r, err := Open(durable.Env{DataDir: dir, Logger: quiet, SkipCorrupt: true}, dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if r.EndOffset() != 6 || r.LogStartOffset() != 6 {
		t.Fatalf("end %d start %d, want 6 and 6", r.EndOffset(), r.LogStartOffset())
	}
}

// TestRecoveryPoint: after a crash the last segment is trusted up to the
// recovery point (damage below it is corruption) and scanned after it (a
// bad batch there is a torn tail, cut).
func TestRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	batch := batchOf(t0.UnixMilli(), "x", "y")
	appendSync(t, l, t0, batch, batch)
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	appendSync(t, l, t0, batch, batch)
	size := int64(len(batch))

	// Damage above the recovery point: a torn tail.
	crashed := crashCopy(t, dir)
	if err := flipByteAt(3*size + 40)(filepath.Join(crashed, "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	r := openLog(t, crashed, testConfig())
	if r.EndOffset() != 6 {
		t.Fatalf("end %d after cutting the torn tail, want 6", r.EndOffset())
	}

	// Damage below it: corruption.
	crashed = crashCopy(t, dir)
	path := filepath.Join(crashed, "00000000000000000000.log")
	if err := flipByteAt(size + 40)(path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(durable.Env{DataDir: crashed, Logger: quiet}, crashed, testConfig())
	var cerr *durable.CorruptError
	if !errors.As(err, &cerr) || cerr.Path != path || cerr.Offset != size {
		t.Fatalf("Open: %v, want a CorruptError at byte %d", err, size)
	}

	// Fewer bytes than the recovery point vouches for: durable data lost.
	crashed = crashCopy(t, dir)
	if err := truncateTo(size + 10)(filepath.Join(crashed, "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(durable.Env{DataDir: crashed, Logger: quiet}, crashed, testConfig()); !errors.Is(err, durable.ErrCorrupt) {
		t.Fatalf("Open with durable bytes missing: %v", err)
	}
}

// dirSizes lists a directory's files and sizes.
func dirSizes(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, _ := e.Info()
		fmt.Fprintf(&b, "%s %d\n", e.Name(), info.Size())
	}
	return b.String()
}

// TestIndexRebuild: missing or damaged .index/.timeindex files are
// detected and rebuilt from the log, even after a clean shutdown (which
// otherwise trusts them); reads and timestamp lookups stay exact.
func TestIndexRebuild(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
	}{
		{"both missing", removeFiles(".index", ".timeindex")},
		{"offset index missing", removeFiles(".index")},
		{"time index missing", removeFiles(".timeindex")},
		{"offset index empty", writeFiles(".index", nil)},
		{"offset index torn entry", truncateFiles(".index", -3)},
		{"time index torn entry", truncateFiles(".timeindex", -5)},
		{"offset index garbage", writeFiles(".index", []byte("\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x09"))},
		{"offset index points past the file", writeFiles(".index", []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x10\x7f\x00\x00\x00"))},
		{"time index out of order", writeFiles(".timeindex", []byte("\x00\x00\x01\x8b\xcf\xe5\x68\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x06"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			cfg.IndexIntervalBytes = 1 // an index entry per batch
			cfg.SegmentBytes = 4 << 10
			l := openLog(t, dir, cfg)
			for i := 0; i < 60; i++ {
				appendSync(t, l, t0, batchOf(t0.UnixMilli()+int64(i)*10, strings.Repeat("v", 100), strconv.Itoa(i)))
			}
			if l.SegmentCount() < 3 {
				t.Fatalf("only %d segments", l.SegmentCount())
			}
			want := lookups(t, l.View())
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			r := openLog(t, dir, cfg)
			if got := lookups(t, r.View()); got != want {
				t.Fatalf("after rebuilding:\n%s\nwant\n%s", got, want)
			}
			// Close writes the rebuilt indexes; they are used next time.
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			for _, f := range segmentFiles(t, dir) {
				base := strings.TrimSuffix(f, ".log")
				if fileSize(t, filepath.Join(dir, base+".index")) == 0 {
					t.Fatalf("%s.index was not rewritten", base)
				}
			}
			r = openLog(t, dir, cfg)
			if got := lookups(t, r.View()); got != want {
				t.Fatalf("after reopening:\n%s", got)
			}
		})
	}
}

// lookups summarises every offset and timestamp lookup over a view.
func lookups(t *testing.T, v *View) string {
	t.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "batches %v\n", readAll(t, v, 0))
	for ts := t0.UnixMilli() - 1; ts <= t0.UnixMilli()+600; ts += 7 {
		off, at, ok, err := v.OffsetForTimestamp(ts, v.HighWatermark)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%d:%d@%d/%v ", ts, off, at, ok)
	}
	off, at, ok, err := v.MaxTimestamp(v.HighWatermark)
	fmt.Fprintf(&sb, "\nmax %d@%d/%v %v", off, at, ok, err)
	return sb.String()
}

// TestCleanShutdownMarker: Close leaves a marker that makes the next Open
// trust the stored indexes (no full scan); Open removes it at once, so a
// crash afterwards is recovered in full.
func TestCleanShutdownMarker(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.IndexIntervalBytes = 1
	l := openLog(t, dir, cfg)
	a := batchOf(t0.UnixMilli(), "a")
	appendSync(t, l, t0, a, a, a)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, cleanShutdownFile)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no clean-shutdown marker after Close: %v", err)
	}
	// Damage the first batch's CRC. With the marker, the indexed part of
	// the log is trusted and left alone ...
	if err := flipByteAt(int64(len(a)) - 1)(filepath.Join(dir, "00000000000000000000.log")); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	if l.EndOffset() != 3 {
		t.Fatalf("after a clean shutdown the log was rescanned: end %d", l.EndOffset())
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("Open left the marker in place: %v", err)
	}
	// ... while after a crash (with no recovery point) the active segment
	// is validated in full.
	crashed := crashCopy(t, dir)
	if err := os.Remove(filepath.Join(crashed, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	r := openLog(t, crashed, cfg)
	if r.EndOffset() != 0 {
		t.Fatalf("after a crash the corrupt batch survived: end %d", r.EndOffset())
	}
}

func truncateTo(n int64) func(string) error {
	return func(path string) error { return os.Truncate(path, n) }
}

func flipByteAt(pos int64) func(string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		var b [1]byte
		if _, err := f.ReadAt(b[:], pos); err != nil {
			return err
		}
		b[0] ^= 0xff
		_, err = f.WriteAt(b[:], pos)
		return err
	}
}

func zeroFrom(pos int64) func(string) error {
	return func(path string) error {
		size, err := os.Stat(path)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteAt(make([]byte, size.Size()-pos+4096), pos)
		return err
	}
}

func appendBytes(b []byte) func(string) error {
	return func(path string) error {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Write(b)
		return err
	}
}

func eachFile(dir, suffix string, fn func(string) error) error {
	m, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return fmt.Errorf("no %s files", suffix)
	}
	for _, p := range m {
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

func removeFiles(suffixes ...string) func(string) error {
	return func(dir string) error {
		for _, s := range suffixes {
			if err := eachFile(dir, s, os.Remove); err != nil {
				return err
			}
		}
		return nil
	}
}

func writeFiles(suffix string, b []byte) func(string) error {
	return func(dir string) error {
		return eachFile(dir, suffix, func(p string) error { return os.WriteFile(p, b, 0o644) })
	}
}

func truncateFiles(suffix string, delta int64) func(string) error {
	return func(dir string) error {
		return eachFile(dir, suffix, func(p string) error {
			st, err := os.Stat(p)
			if err != nil {
				return err
			}
			return os.Truncate(p, st.Size()+delta)
		})
	}
}

// TestTimestampLookupReportsUndecodableBatches is issue 9 row 15: a
// stored batch whose records do not decode made ListOffsets by timestamp
// answer "no such offset" (the decode error was overwritten by the walk's
// nil). It is an error now, wrapping ErrCorruptBatch.
func TestTimestampLookupReportsUndecodableBatches(t *testing.T) {
	l := openLog(t, t.TempDir(), testConfig())
	good := batchOf(t0.UnixMilli(), "a")
	bad := batchOf(t0.UnixMilli()+10, "b", "c")
	binary.BigEndian.PutUint16(bad[21:], 1) // claims gzip: the records are not
	batchtest.FixCRC(bad)
	appendSync(t, l, t0, good, bad)
	_, _, found, err := l.View().OffsetForTimestamp(t0.UnixMilli()+5, l.HighWatermark())
	if !errors.Is(err, ErrCorruptBatch) || found {
		t.Fatalf("lookup over an undecodable batch: found=%v err=%v, want ErrCorruptBatch", found, err)
	}
	if _, _, _, err := l.View().MaxTimestamp(l.HighWatermark()); !errors.Is(err, ErrCorruptBatch) {
		t.Fatalf("max timestamp over an undecodable batch: %v", err)
	}
}
