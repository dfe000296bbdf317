package partlog

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/partlog/batchtest"
)

// batchOf builds a plain batch stamped ts, ts+1ms, ….
func batchOf(ts int64, values ...string) []byte { return batchtest.Plain(ts, values...) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testConfig is a small-segment configuration with nothing deleted.
func testConfig() Config {
	c := DefaultConfig()
	c.RetentionMs, c.RetentionBytes = -1, -1
	c.SegmentMs = -1
	c.FileDeleteDelay = 0
	return c
}

// openLog opens dir and closes it when the test ends (unless the test
// closed it already).
func openLog(t *testing.T, dir string, cfg Config) *Log {
	t.Helper()
	l, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendSync appends batches and makes them durable and visible, as the
// partition actor does after its group-commit fsync.
func appendSync(t *testing.T, l *Log, now time.Time, batches ...[]byte) []BatchHeader {
	t.Helper()
	var hs []BatchHeader
	for _, b := range batches {
		h, err := l.Append(append([]byte(nil), b...), now)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		hs = append(hs, h)
	}
	sync(t, l)
	return hs
}

func sync(t testing.TB, l *Log) {
	t.Helper()
	if j := l.PrepareSync(); j != nil {
		if err := j.Run(); err != nil {
			t.Fatal(err)
		}
		l.Advance(j)
	}
	l.Publish(l.HighWatermark())
}

// readAll returns the base offsets of every batch a reader sees from
// offset to the high watermark, reading in small steps.
func readAll(t *testing.T, v *View, from int64) []int64 {
	t.Helper()
	var out []int64
	for off := from; off < v.HighWatermark; {
		data, err := v.Read(off, 1, v.HighWatermark)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		batches, err := SplitBatches(data)
		if err != nil || len(batches) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", off, len(data), err)
		}
		h, _ := ParseBatchHeader(batches[0])
		if !ValidCRC(batches[0]) {
			t.Fatalf("batch at %d fails its CRC", h.BaseOffset)
		}
		out = append(out, h.BaseOffset)
		off = h.NextOffset()
	}
	return out
}

// segmentFiles lists the .log files of dir.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func allZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
