package partlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/durable"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

// kv is one record of a test batch; a nil value is a tombstone, keyless
// a record without a key (the produce path refuses it on a compacted
// topic; a topic made compacted later holds them).
type kv struct {
	key, value string
	tombstone  bool
	keyless    bool
}

// keyedBatch is a batch of keyed records, with a producer id when pid >= 0.
func keyedBatch(pid int64, epoch int16, seq int32, attrs int16, ts int64, recs ...kv) []byte {
	var records []byte
	for i, r := range recs {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte(r.key), Value: []byte(r.value)}
		if r.tombstone {
			rec.Value = nil
		}
		if r.keyless {
			rec.Key = nil
		}
		rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
		records = rec.AppendTo(records)
	}
	if pid < 0 {
		epoch, seq = -1, -1
	}
	h := BatchHeader{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts, Attributes: attrs}
	return encodeBatch(h, attrs, ts, ts+int64(len(recs)-1), int32(len(recs)), records)
}

// seen is one record read back.
type seen struct {
	offset     int64
	key, value string
	tombstone  bool
}

// readRecords returns every record a reader sees, in order, and checks
// each batch's CRC and that offsets only rise.
func readRecords(t *testing.T, v *View) ([]seen, []BatchHeader) {
	t.Helper()
	var out []seen
	var hs []BatchHeader
	last := int64(-1)
	err := v.ForEachBatch(v.LogStart, v.HighWatermark, func(b []byte) bool {
		h, err := ParseBatchHeader(b)
		if err != nil || !ValidCRC(b) {
			t.Fatalf("batch at %d: %v, CRC ok %v", h.BaseOffset, err, ValidCRC(b))
		}
		if h.BaseOffset <= last {
			t.Fatalf("batch at %d after offset %d", h.BaseOffset, last)
		}
		last = h.LastOffset()
		hs = append(hs, h)
		if h.IsControl() {
			return true
		}
		if err := eachFullRecord(b, h, 0, func(r kmsg.Record) {
			out = append(out, seen{h.BaseOffset + int64(r.OffsetDelta), string(r.Key), string(r.Value), r.Value == nil})
		}); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, hs
}

// latest is the table a consumer builds: the last value per key, with
// tombstoned keys absent.
func latest(recs []seen) map[string]seen {
	m := map[string]seen{}
	for _, r := range recs {
		if r.tombstone {
			delete(m, r.key)
		} else {
			m[r.key] = r
		}
	}
	return m
}

func compactConfig() Config {
	c := testConfig()
	c.Compact, c.Delete = true, false
	c.SegmentBytes = 600
	c.MinCleanableRatio = 0
	c.DeleteRetentionMs = 1000
	return c
}

// cleanOnce plans, runs and installs a pass as the partition actor does.
func cleanOnce(t *testing.T, l *Log, now time.Time, producers map[int64]ProducerLast, mapBytes int64) *CleanResult {
	t.Helper()
	p := l.PlanClean(now, l.HighWatermark(), producers, "t1")
	if p == nil {
		return nil
	}
	r, err := p.Run(CleanOptions{MapBytes: mapBytes})
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	if _, err := l.InstallCleaned(r, nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	sync(t, l)
	return r
}

// TestCleanKeepsLatestPerKey: a table workload (keys updated many times,
// a tombstone) cleaned keeps exactly the latest record of each key at its
// original offset, below the active segment; the table a consumer builds
// is unchanged; the tombstone goes once its delete horizon passed; all of
// it survives a reopen.
func TestCleanKeepsLatestPerKey(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	for i := 0; i < 120; i++ {
		r := kv{key: fmt.Sprintf("k%d", i%7), value: fmt.Sprintf("v%d", i)}
		switch i {
		case 10:
			r = kv{key: "gone", value: "soon"}
		case 60:
			r = kv{key: "gone", tombstone: true}
		}
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli()+int64(i), r))
	}
	before, _ := readRecords(t, l.View())
	orig := map[int64]seen{}
	for _, r := range before {
		orig[r.offset] = r
	}
	segsBefore := l.SegmentCount()
	res := cleanOnce(t, l, t0, nil, 1<<20)
	if res == nil {
		t.Fatal("nothing to clean")
	}
	check := func(l *Log, tombstoneGone bool) {
		t.Helper()
		after, _ := readRecords(t, l.View())
		keys := map[string]bool{}
		for _, r := range after {
			if o, ok := orig[r.offset]; !ok || o != r {
				t.Fatalf("record %+v is not the original at its offset (%+v)", r, o)
			}
			if r.offset < res.EndOffset {
				if keys[r.key] {
					t.Fatalf("key %s twice below the cleaned end %d", r.key, res.EndOffset)
				}
				keys[r.key] = true
			}
			if tombstoneGone && r.tombstone {
				t.Fatalf("tombstone at %d kept past its horizon", r.offset)
			}
		}
		if got, want := latest(after), latest(before); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("table after cleaning %v, want %v", got, want)
		}
	}
	check(l, false)
	hasTombstone := func() bool {
		recs, _ := readRecords(t, l.View())
		for _, r := range recs {
			if r.tombstone {
				return true
			}
		}
		return false
	}
	if !hasTombstone() {
		t.Fatal("the tombstone went before delete.retention.ms")
	}
	// Past the horizon: the tombstone goes, with nothing new written.
	if cleanOnce(t, l, t0.Add(2*time.Second), nil, 1<<20) == nil {
		t.Fatal("no pass once the delete horizon passed")
	}
	if hasTombstone() {
		t.Fatal("tombstone kept past its delete horizon")
	}
	check(l, true)
	// The second pass groups the segments the first left small (Apache
	// groups by their current sizes).
	if l.SegmentCount() >= segsBefore {
		t.Fatalf("%d segments after cleaning, %d before: small cleaned segments should merge", l.SegmentCount(), segsBefore)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	check(l, true)
	h := appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: "k0", value: "new"}))
	if h[0].BaseOffset != 120 {
		t.Fatalf("append after reopen at %d, want 120", h[0].BaseOffset)
	}
}

// TestCleanKeepsProducerState: every record of an idempotent producer is
// superseded, but its last batch stays (emptied) with its producer id,
// epoch, base sequence and offsets, so its state can be rebuilt; aborted
// transactional data goes, its marker stays until its horizon.
func TestCleanKeepsProducerState(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	var lastIdem BatchHeader
	for i := 0; i < 5; i++ {
		h := appendSync(t, l, t0, keyedBatch(7, 2, int32(i*2), 0, t0.UnixMilli(), kv{key: "a", value: "idem"}, kv{key: "b", value: "idem"}))
		lastIdem = h[0]
	}
	// An aborted transaction of producer 9.
	txnFirst := appendSync(t, l, t0, keyedBatch(9, 0, 0, AttrTransactional, t0.UnixMilli(), kv{key: "c", value: "aborted"}))[0]
	marker := appendSync(t, l, t0, BuildMarker(9, 0, false, 0, t0.UnixMilli()))[0]
	if err := l.AppendAborted(AbortedTxn{ProducerID: 9, FirstOffset: txnFirst.BaseOffset, LastOffset: marker.BaseOffset, LastStableOffset: txnFirst.BaseOffset}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: []string{"a", "b"}[i%2], value: fmt.Sprint(i)}))
	}
	producers := map[int64]ProducerLast{7: {LastDataOffset: lastIdem.LastOffset(), Epoch: 2}, 9: {LastDataOffset: txnFirst.LastOffset(), Epoch: 0}}
	if cleanOnce(t, l, t0, producers, 1<<20) == nil {
		t.Fatal("nothing cleaned")
	}
	recs, hs := readRecords(t, l.View())
	var kept7, kept9, markers int
	for _, h := range hs {
		switch {
		case h.ProducerID == 7:
			kept7++
			if h.BaseOffset != lastIdem.BaseOffset || h.LastOffsetDelta != lastIdem.LastOffsetDelta || h.BaseSequence != 8 || h.ProducerEpoch != 2 || h.NumRecords != 0 {
				t.Fatalf("producer 7's batch kept as %+v, want the emptied last one %+v", h, lastIdem)
			}
		case h.ProducerID == 9 && h.IsControl():
			// Kept: a batch of its transaction is (emptied, as its
			// producer's last), so it is not yet discardable (Apache).
			markers++
		case h.ProducerID == 9:
			kept9++
			if h.NumRecords != 0 || !h.IsTransactional() {
				t.Fatalf("aborted batch kept with records or without its attributes: %+v", h)
			}
		}
	}
	if kept7 != 1 || kept9 != 1 || markers != 1 {
		t.Fatalf("kept: producer 7 %d batches, producer 9 %d batches and %d markers", kept7, kept9, markers)
	}
	for _, r := range recs {
		if r.value == "aborted" || r.value == "idem" {
			t.Fatalf("record %+v should be gone", r)
		}
	}
}

// TestCleanInSeveralPasses: a dedupe budget that holds a few keys cleans
// the partition in several passes, to the same result.
func TestCleanInSeveralPasses(t *testing.T) {
	l := openLog(t, t.TempDir(), compactConfig())
	for i := 0; i < 200; i++ {
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: fmt.Sprintf("key-%02d", i%40), value: fmt.Sprint(i)}))
	}
	before, _ := readRecords(t, l.View())
	passes := 0
	for cleanOnce(t, l, t0, nil, 10*(6+mapEntryOverhead)) != nil {
		passes++
		if passes > 100 {
			t.Fatal("cleaning does not finish")
		}
	}
	if passes < 2 {
		t.Fatalf("%d passes with a 10-key map", passes)
	}
	after, _ := readRecords(t, l.View())
	if fmt.Sprint(latest(after)) != fmt.Sprint(latest(before)) {
		t.Fatal("table changed")
	}
	if len(after) > 40+len(after)/2 {
		t.Fatalf("%d records left of 200 for 40 keys", len(after))
	}
}

// TestCleanCrashLoop: a power loss at any file operation of a pass (its
// writes, the swap's renames, removals and fsyncs) recovers to the old
// segments or the new ones: every acknowledged key's latest value is
// there at its offset, no record that is not an original, offsets never
// reused.
func TestCleanCrashLoop(t *testing.T) { memfs.Rounds(t, 60, cleanCrashRound) }

func cleanCrashRound(t *testing.T, r *rand.Rand) {
	m := memfs.New()
	efs := errorfs.Wrap(m)
	if err := durable.MkdirAll(m, "/data"); err != nil {
		t.Fatal(err)
	}
	env := durable.Env{FS: efs, DataDir: "/data", Logger: quiet}
	cfg := compactConfig()
	cfg.SegmentBytes = int64(300 + r.IntN(1000))
	cfg.IndexIntervalBytes = int64(1 + r.IntN(300))
	dir := "/data/t-0"
	l, err := Open(env, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := 3 + r.IntN(10)
	n := 50 + r.IntN(150)
	// Batches of several records, compressed in some rounds, so passes
	// rewrite batches that keep part of their records (with their codec).
	perBatch := 1 + r.IntN(4)
	codec := int16(r.IntN(5))
	for i := 0; i < n; i += perBatch {
		var recs []kv
		for j := 0; j < perBatch; j++ {
			rec := kv{key: fmt.Sprintf("k%d", r.IntN(keys)), value: fmt.Sprintf("v%d", i+j)}
			if r.IntN(10) == 0 {
				rec = kv{key: rec.key, tombstone: true}
			}
			recs = append(recs, rec)
		}
		b := keyedBatch(-1, -1, -1, 0, t0.UnixMilli()+int64(i), recs...)
		if codec != 0 {
			b = compressedKeyedBatch(codec, t0.UnixMilli()+int64(i), recs...)
		}
		appendSync(t, l, t0, b)
	}
	acked, _ := readRecords(t, l.View())
	orig := map[int64]seen{}
	for _, a := range acked {
		orig[a.offset] = a
	}
	end := l.EndOffset()
	// Crash before the k-th file operation from here on.
	target := r.IntN(200)
	var crashed *memfs.FS
	ops := 0
	efs.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Read || op.Kind == errorfs.Stat || op.Kind == errorfs.ReadDir {
			return nil
		}
		if ops == target && crashed == nil {
			crashed = m.Crash(memfs.CrashOptions{Rand: r})
		}
		ops++
		return nil
	})
	for pass := 0; pass < 3; pass++ {
		now := t0.Add(time.Duration(pass) * 2 * time.Second)
		p := l.PlanClean(now, l.HighWatermark(), nil, fmt.Sprintf("p%d", pass))
		if p == nil {
			break
		}
		res, err := p.Run(CleanOptions{MapBytes: int64(1 + r.IntN(4)*200)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.InstallCleaned(res, nil); err != nil {
			t.Fatal(err)
		}
		sync(t, l)
	}
	efs.Set(nil)
	if crashed == nil {
		crashed = m.Crash(memfs.CrashOptions{Rand: r})
	}
	_ = l.Close()
	env.FS = crashed
	rl, err := Open(env, dir, cfg)
	if err != nil {
		t.Fatalf("recovery after a crash during cleaning: %v\n%s", err, crashed.Dump())
	}
	defer rl.Close()
	got, _ := readRecords(t, rl.View())
	for _, g := range got {
		if o, ok := orig[g.offset]; !ok || o != g {
			t.Fatalf("record %+v is not the original at its offset\n%s", g, crashed.Dump())
		}
	}
	if fmt.Sprint(latest(got)) != fmt.Sprint(latest(acked)) {
		t.Fatalf("table after crash %v, want %v\n%s", latest(got), latest(acked), crashed.Dump())
	}
	if rl.EndOffset() < end {
		t.Fatalf("log end %d after recovery, below %d: offsets would be reused", rl.EndOffset(), end)
	}
	h := appendSync(t, rl, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: "after", value: "x"}))
	if h[0].BaseOffset < end {
		t.Fatalf("append after recovery at %d, below %d", h[0].BaseOffset, end)
	}
}

// TestCleanWriteFailure: a failed write while cleaning fails the pass
// only: its files go, the log stays online and unchanged.
func TestCleanWriteFailure(t *testing.T) {
	m := memfs.New()
	efs := errorfs.Wrap(m)
	env := durable.Env{FS: efs, DataDir: "/d", Logger: quiet}
	cfg := compactConfig()
	l, err := Open(env, "/d/t-0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 60; i++ {
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: fmt.Sprint(i % 3), value: fmt.Sprint(i)}))
	}
	before, _ := readRecords(t, l.View())
	p := l.PlanClean(t0, l.HighWatermark(), nil, "x")
	boom := errors.New("disk full")
	efs.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Write {
			return boom
		}
		return nil
	})
	if _, err := p.Run(CleanOptions{MapBytes: 1 << 20}); !errors.Is(err, boom) {
		t.Fatalf("pass with failing writes: %v", err)
	}
	efs.Set(nil)
	if l.Failed() != nil {
		t.Fatalf("a failed pass took the log offline: %v", l.Failed())
	}
	after, _ := readRecords(t, l.View())
	if len(after) != len(before) {
		t.Fatal("a failed pass changed the log")
	}
	entries, _ := m.ReadDir("/d/t-0")
	for _, e := range entries {
		if len(e.Name()) > 8 && e.Name()[len(e.Name())-8:] == cleanedSuffix {
			t.Fatalf("a failed pass left %s", e.Name())
		}
	}
}

// TestCleanCorruptSegment: a closed segment holding a batch that fails
// its CRC stops the pass with ErrCleanCorrupt: nothing is written, the
// log stays as it was and online (the partition's cleaner goes offline,
// not the partition).
func TestCleanCorruptSegment(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, compactConfig())
	for i := 0; i < 60; i++ {
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: fmt.Sprint(i % 3), value: fmt.Sprint(i)}))
	}
	// Flip a byte of the second batch's value in the first segment (its
	// bytes on disk; the log keeps its indexes in memory).
	first := segmentFiles(t, dir)[0]
	f, err := os.OpenFile(filepath.Join(dir, first), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(keyedBatch(-1, -1, -1, 0, t0.UnixMilli(), kv{key: "0", value: "0"})))
	if _, err := f.WriteAt([]byte{'X'}, size+size-2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p := l.PlanClean(t0, l.HighWatermark(), nil, "c")
	if p == nil {
		t.Fatal("nothing to clean")
	}
	if _, err := p.Run(CleanOptions{MapBytes: 1 << 20}); !errors.Is(err, ErrCleanCorrupt) {
		t.Fatalf("pass over a corrupt segment: %v, want ErrCleanCorrupt", err)
	}
	if l.Failed() != nil {
		t.Fatalf("the log went offline: %v", l.Failed())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.cleaned")); len(m) != 0 {
		t.Fatalf("a failed pass left %v", m)
	}
	if got := len(readAll(t, l.View(), 2)); got != 58 {
		t.Fatalf("%d batches readable after the failed pass, want 58", got)
	}
}

// TestCleanWritesOnlyChangedSegments: a segment that loses nothing is
// neither rewritten nor fsynced (no file of the pass, nothing counted as
// written); one that loses a record is written from its first change on,
// the bytes before it copied whole, so every kept batch keeps its bytes.
func TestCleanWritesOnlyChangedSegments(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	var batches [][]byte
	for i := 0; i < 40; i++ {
		// Distinct keys, except that record 30 updates k3: the first
		// segment loses one batch, the others none.
		key := fmt.Sprintf("k%d", i)
		if i == 30 {
			key = "k3"
		}
		b := keyedBatch(-1, -1, -1, 0, t0.UnixMilli()+int64(i), kv{key: key, value: fmt.Sprintf("value-%02d", i)})
		batches = append(batches, b)
		appendSync(t, l, t0, b)
	}
	firstFiles := segmentFiles(t, dir)
	firstLog := filepath.Join(dir, firstFiles[0])
	old, err := os.ReadFile(firstLog)
	if err != nil {
		t.Fatal(err)
	}
	if l.SegmentCount() < 4 {
		t.Fatalf("%d segments, want several", l.SegmentCount())
	}
	res := cleanOnce(t, l, t0, nil, 1<<20)
	if res == nil {
		t.Fatal("nothing to clean")
	}
	// Only the first segment changed: its new bytes are the old ones but
	// k3's first batch (the fourth, all of them the same size).
	got, err := os.ReadFile(firstLog)
	if err != nil {
		t.Fatal(err)
	}
	n := len(batches[3])
	want := append(append([]byte(nil), old[:3*n]...), old[4*n:]...)
	if string(got) != string(want) {
		t.Fatalf("the rewritten segment (%d bytes) is not the old one (%d) less one batch: kept batches must keep their bytes", len(got), len(old))
	}
	if res.Stats.BytesWritten != int64(len(got)) {
		t.Fatalf("%d bytes written, want only the changed segment's %d", res.Stats.BytesWritten, len(got))
	}
	if res.Stats.RecordsRemoved != 1 {
		t.Fatalf("%d records removed, want 1", res.Stats.RecordsRemoved)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*"+cleanedSuffix))
	if len(matches) > 0 {
		t.Fatalf("files of the pass left behind: %v", matches)
	}
	recs, _ := readRecords(t, l.View())
	if len(recs) != 39 {
		t.Fatalf("%d records after cleaning, want 39", len(recs))
	}
	for _, r := range recs {
		if r.key == "k3" && r.offset != 30 {
			t.Fatalf("k3 kept at %d, want only its latest at 30", r.offset)
		}
	}
}

// TestCleanPartlyKeptBatches: batches that lose some of their records
// keep the others with their offsets, keys, values and timestamps, and a
// max timestamp of what they kept, under a valid CRC (the kept records'
// bytes are copied as they are when the base timestamp stays).
func TestCleanPartlyKeptBatches(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	type rec struct {
		key, value string
		ts         int64
	}
	orig := map[int64]rec{}
	off := int64(0)
	for b := 0; b < 30; b++ {
		var recs []kv
		ts := t0.UnixMilli() + int64(100*b)
		for j := 0; j < 5; j++ {
			// Keys shared with the next batch: each batch loses some.
			k := fmt.Sprintf("k%d", (b*3+j)%40)
			recs = append(recs, kv{key: k, value: fmt.Sprintf("v%d-%d", b, j)})
			orig[off] = rec{k, fmt.Sprintf("v%d-%d", b, j), ts + int64(j)}
			off++
		}
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, ts, recs...))
	}
	res := cleanOnce(t, l, t0, nil, 1<<20)
	if res == nil || res.Stats.RecordsRemoved == 0 {
		t.Fatalf("nothing removed: %+v", res)
	}
	v := l.View()
	partly := 0
	err := v.ForEachBatch(v.LogStart, v.HighWatermark, func(b []byte) bool {
		h, err := ParseBatchHeader(b)
		if err != nil || !ValidCRC(b) {
			t.Fatalf("batch at %d: %v, CRC ok %v", h.BaseOffset, err, ValidCRC(b))
		}
		n, maxTS := 0, int64(-1)
		if err := eachFullRecord(b, h, 0, func(r kmsg.Record) {
			o := h.BaseOffset + int64(r.OffsetDelta)
			got := rec{string(r.Key), string(r.Value), h.BaseTimestamp + r.TimestampDelta64}
			if got != orig[o] {
				t.Fatalf("offset %d: %+v, want %+v", o, got, orig[o])
			}
			n++
			maxTS = max(maxTS, got.ts)
		}); err != nil {
			t.Fatal(err)
		}
		if n > 0 && n < 5 {
			partly++
			if h.MaxTimestamp != maxTS {
				t.Fatalf("batch at %d: max timestamp %d, want %d", h.BaseOffset, h.MaxTimestamp, maxTS)
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if partly == 0 {
		t.Fatal("no batch kept only part of its records")
	}
}

// TestCleanCheckpointOffTheActor: installing a pass writes no file (its
// checkpoint's two fsyncs would hold appends); the next pass writes it
// before anything else, off the actor, unless one did less than
// cleanerCheckpointInterval before, and Close writes the last one, so a
// reopened log starts from where cleaning got.
func TestCleanCheckpointOffTheActor(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	produceRound := func(from int) {
		for i := from; i < from+60; i++ {
			appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli()+int64(i), kv{key: fmt.Sprintf("k%d", i%5), value: fmt.Sprintf("v%d", i)}))
		}
	}
	checkpoint := func() string {
		b, err := os.ReadFile(filepath.Join(dir, cleanerOffsetFile))
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))[0]
	}
	produceRound(0)
	first := cleanOnce(t, l, t0, nil, 1<<20)
	if first == nil {
		t.Fatal("nothing to clean")
	}
	if got := checkpoint(); got != "" {
		t.Fatalf("the install wrote the checkpoint (%s)", got)
	}
	produceRound(60)
	p := l.PlanClean(t0, l.HighWatermark(), nil, "t2")
	if p == nil {
		t.Fatal("no second pass")
	}
	r, err := p.Run(CleanOptions{MapBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoint(), strconv.FormatInt(first.EndOffset, 10); got != want {
		t.Fatalf("the second pass wrote checkpoint %q, want the first's end %s", got, want)
	}
	if _, err := l.InstallCleaned(r, nil); err != nil {
		t.Fatal(err)
	}
	// A pass within cleanerCheckpointInterval of the last write leaves
	// the checkpoint as it is; one after it writes the newer one.
	produceRound(120)
	p = l.PlanClean(t0.Add(cleanerCheckpointInterval-time.Millisecond), l.HighWatermark(), nil, "t3")
	if p == nil {
		t.Fatal("no third pass")
	}
	if r, err = p.Run(CleanOptions{MapBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoint(), strconv.FormatInt(first.EndOffset, 10); got != want {
		t.Fatalf("a pass within the interval wrote checkpoint %q, want %s still", got, want)
	}
	if _, err := l.InstallCleaned(r, nil); err != nil {
		t.Fatal(err)
	}
	third := r.EndOffset
	produceRound(180)
	p = l.PlanClean(t0.Add(cleanerCheckpointInterval), l.HighWatermark(), nil, "t4")
	if p == nil {
		t.Fatal("no fourth pass")
	}
	if r, err = p.Run(CleanOptions{MapBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoint(), strconv.FormatInt(third, 10); got != want {
		t.Fatalf("a pass after the interval wrote checkpoint %q, want the third pass's end %s", got, want)
	}
	if _, err := l.InstallCleaned(r, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := checkpoint(), strconv.FormatInt(r.EndOffset, 10); got != want {
		t.Fatalf("Close wrote checkpoint %q, want the second pass's end %s", got, want)
	}
	l = openLog(t, dir, cfg)
	defer l.Close()
	if got := l.CleanerState().CleanedTo; got != r.EndOffset {
		t.Fatalf("reopened log cleaned to %d, want %d", got, r.EndOffset)
	}
}

// TestCleanFoldsEmptyGroups: a group whose records are all superseded
// (the log's cleaned head, once every key of it was produced again)
// leaves no empty segment: the next group's segment takes over its
// range, from its base, and the table is intact, also after a reopen.
func TestCleanFoldsEmptyGroups(t *testing.T) {
	dir := t.TempDir()
	cfg := compactConfig()
	l := openLog(t, dir, cfg)
	round := func(from int) { foldRound(t, l, from) }
	round(0)
	if cleanOnce(t, l, t0, nil, 1<<20) == nil {
		t.Fatal("nothing to clean")
	}
	round(60)
	before, _ := readRecords(t, l.View())
	if cleanOnce(t, l, t0, nil, 1<<20) == nil {
		t.Fatal("no second pass")
	}
	check := func(l *Log) {
		t.Helper()
		for _, name := range segmentFiles(t, dir) {
			if strings.HasSuffix(name, logSuffix) && fileSize(t, filepath.Join(dir, name)) == 0 && name != filepath.Base(segmentPath(dir, l.active().base, logSuffix)) {
				t.Fatalf("an empty closed segment %s is left: %v", name, segmentFiles(t, dir))
			}
		}
		if got := l.segments[0].base; got != 0 {
			t.Fatalf("the first segment starts at %d, want 0", got)
		}
		after, _ := readRecords(t, l.View())
		if got, want := latest(after), latest(before); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("table after cleaning %v, want %v", got, want)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg)
	defer l.Close()
	check(l)
}

// TestCleanMapsTransactionsAfterAnAbortedOne: a committed transaction in
// the dirty part, of a producer whose earlier transaction was aborted in
// the clean part, is mapped: the older records of its keys go. (The map's
// walk starts at the first dirty segment, past the aborted one's marker;
// it took the producer's later transaction for that aborted one.)
func TestCleanMapsTransactionsAfterAnAbortedOne(t *testing.T) {
	l := openLog(t, t.TempDir(), compactConfig())
	ts := t0.UnixMilli()
	filler := func(n int) {
		for i := 0; i < n; i++ {
			appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, ts, kv{key: fmt.Sprintf("f%d", i%3), value: fmt.Sprint(i)}))
		}
	}
	appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, ts, kv{key: "a", value: "old"}))
	first := appendSync(t, l, t0, keyedBatch(9, 0, 0, AttrTransactional, ts, kv{key: "x", value: "aborted"}))[0]
	marker := appendSync(t, l, t0, BuildMarker(9, 0, false, 0, ts))[0]
	if err := l.AppendAborted(AbortedTxn{ProducerID: 9, FirstOffset: first.BaseOffset, LastOffset: marker.BaseOffset, LastStableOffset: first.BaseOffset}); err != nil {
		t.Fatal(err)
	}
	filler(20)
	if cleanOnce(t, l, t0, nil, 1<<20) == nil {
		t.Fatal("nothing cleaned")
	}
	appendSync(t, l, t0, keyedBatch(9, 0, 1, AttrTransactional, ts, kv{key: "a", value: "new"}))
	appendSync(t, l, t0, BuildMarker(9, 0, true, 0, ts))
	filler(20)
	if cleanOnce(t, l, t0, nil, 1<<20) == nil {
		t.Fatal("no second pass")
	}
	recs, _ := readRecords(t, l.View())
	var values []string
	for _, r := range recs {
		if r.key == "a" {
			values = append(values, r.value)
		}
	}
	if fmt.Sprint(values) != "[new]" {
		t.Fatalf("key a holds %v after cleaning, want [new]", values)
	}
}

// TestCleanFoldCreatesNoFiles: a group left empty that folds into the
// next creates no file (no file written, fsynced and removed again).
func TestCleanFoldCreatesNoFiles(t *testing.T) {
	m := memfs.New()
	efs := errorfs.Wrap(m)
	if err := durable.MkdirAll(m, "/data"); err != nil {
		t.Fatal(err)
	}
	l, err := Open(durable.Env{FS: efs, DataDir: "/data", Logger: quiet}, "/data/t-0", compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	round := func(from int) { foldRound(t, l, from) }
	round(0)
	if cleanOnce(t, l, t0, nil, 1<<20) == nil {
		t.Fatal("nothing to clean")
	}
	round(60)
	p := l.PlanClean(t0, l.HighWatermark(), nil, "t2")
	if p == nil {
		t.Fatal("no second pass")
	}
	var removed []string
	efs.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Remove && strings.HasSuffix(op.Path, cleanedSuffix) {
			removed = append(removed, op.Path)
		}
		return nil
	})
	res, err := p.Run(CleanOptions{MapBytes: 1 << 20})
	efs.Set(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) > 0 {
		t.Fatalf("the pass created and removed %v", removed)
	}
	if len(res.groups) == 0 || res.groups[0].from != 0 {
		t.Fatalf("no group folded into one from 0: %+v", res.groups)
	}
	if _, err := l.InstallCleaned(res, nil); err != nil {
		t.Fatal(err)
	}
}

// foldRound appends 60 batches over 5 keys from the from-th: a round
// after the first supersedes every key of the cleaned head.
func foldRound(t *testing.T, l *Log, from int) {
	for i := from; i < from+60; i++ {
		appendSync(t, l, t0, keyedBatch(-1, -1, -1, 0, t0.UnixMilli()+int64(i), kv{key: fmt.Sprintf("k%d", i%5), value: fmt.Sprintf("v%d", i)}))
	}
}
