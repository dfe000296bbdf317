package partlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"kaas/storage/durable"
)

// readBytes is everything a reader sees from offset 0.
func readBytes(t *testing.T, l *Log) []byte {
	t.Helper()
	v := l.View()
	var out []byte
	for off := int64(0); off < v.HighWatermark; {
		data, err := v.Read(off, 1<<20, v.HighWatermark)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		batches, err := SplitBatches(data)
		if err != nil || len(batches) == 0 {
			t.Fatalf("Read(%d): %d bytes, %v", off, len(data), err)
		}
		for _, b := range batches {
			h, _ := ParseBatchHeader(b)
			if h.BaseOffset >= off {
				out = append(out, b...)
				off = h.NextOffset()
			}
		}
	}
	return out
}

// TestTakeOverSealsThePreviousOwnersSegment: a new owner recovers the
// partition while the deposed one still has its files open, and the
// deposed one's write lands late. It neither overwrites what the new
// owner appends nor becomes visible, and a later recovery cuts it and
// finds the same log.
func TestTakeOverSealsThePreviousOwnersSegment(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int // batches the old owner wrote before losing the partition
	}{{"active segment with data", 3}, {"empty active segment", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig()
			deposed := openLog(t, dir, cfg)
			for i := 0; i < tc.first; i++ {
				appendSync(t, deposed, t0, batchOf(t0.UnixMilli(), "old"))
			}
			owner := openLog(t, dir, cfg)
			if err := owner.TakeOver(t0, nil); err != nil {
				t.Fatal(err)
			}
			// The deposed owner's write lands now, where it would have.
			if _, err := deposed.Append(batchOf(t0.UnixMilli(), "late"), t0); err != nil {
				t.Fatal(err)
			}
			sync(t, deposed)
			appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "new"), batchOf(t0.UnixMilli(), "new"))
			if _, err := deposed.Append(batchOf(t0.UnixMilli(), "late"), t0); err != nil {
				t.Fatal(err)
			}
			sync(t, deposed)
			seen := readBytes(t, owner)
			if bytes.Contains(seen, []byte("late")) {
				t.Fatal("the deposed owner's late write is visible")
			}
			if n := bytes.Count(seen, []byte("new")); n != 2 {
				t.Fatalf("%d of the new owner's 2 batches readable", n)
			}
			if n := bytes.Count(seen, []byte("old")); n != tc.first {
				t.Fatalf("%d of the old owner's %d batches readable", n, tc.first)
			}
			if owner.EndOffset() != int64(tc.first+2) {
				t.Fatalf("end offset %d, want %d", owner.EndOffset(), tc.first+2)
			}
			if err := owner.Close(); err != nil {
				t.Fatal(err)
			}
			deposed.Abandon()

			again, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, cfg)
			if err != nil {
				t.Fatalf("recovery after the late write: %v", err)
			}
			defer again.Close()
			if got := readBytes(t, again); !bytes.Equal(got, seen) {
				t.Fatalf("recovered log differs from what the owner served:\n%q\n%q", got, seen)
			}
			if tc.first > 0 {
				sealed := filepath.Join(dir, "00000000000000000000.log")
				if st, err := os.Stat(sealed); err != nil || bytes.Contains(mustRead(t, sealed), []byte("late")) {
					t.Fatalf("the sealed segment still holds the late write (%v)", st)
				}
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Files reopen by path once the cache has closed them idle. A takeover of
// an empty active segment replaces the file at the same name, so a deposed
// owner whose descriptor the cache closed would reopen the new owner's
// segment: the reopen checks the file's identity and fails instead, the
// late write is refused (its log goes offline), and the new owner's
// segment never holds it.
func TestDeposedOwnerCannotReopenTheNewOwnersSegment(t *testing.T) {
	fastFileSweep(t)
	dir := t.TempDir()
	cfg := testConfig()
	deposed := openLog(t, dir, cfg)
	defer deposed.Abandon()
	owner := openLog(t, dir, cfg)
	if err := owner.TakeOver(t0, nil); err != nil {
		t.Fatal(err)
	}
	appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "new"))
	waitFor(t, "every idle segment file closed", func() bool { return descriptorsUnder(t, dir) == 0 })

	_, err := deposed.Append(batchOf(t0.UnixMilli(), "late"), t0)
	if err == nil {
		if j := deposed.PrepareSync(); j != nil {
			err = j.Run()
		}
	}
	if !errors.Is(err, ErrSegmentReplaced) {
		t.Fatalf("the deposed owner's late write: %v, want ErrSegmentReplaced", err)
	}
	seen := readBytes(t, owner)
	if bytes.Contains(seen, []byte("late")) || bytes.Count(seen, []byte("new")) != 1 {
		t.Fatalf("the new owner serves %q", seen)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := readBytes(t, again); !bytes.Equal(got, seen) {
		t.Fatalf("recovered %q, served %q", got, seen)
	}
}

// Found by the chaos checker (seed 102): a broker claimed a partition,
// paused before opening it, and resumed after its lease had expired and a
// peer had taken the partition over and begun appending to a new, still
// empty, active segment. Its recovery had read that segment empty, so
// its take-over replaced the file — and the peer went on acknowledging
// records written into the unlinked one: twelve acknowledged records
// gone. A take-over whose claim went stale writes nothing, and one whose
// recovered segment has changed on disk since (the real owner appended)
// refuses too.
func TestStaleTakeOverWritesNothing(t *testing.T) {
	reopen := func(t *testing.T, dir string, cfg Config) []byte {
		t.Helper()
		again, err := Open(durable.Env{DataDir: dir, Logger: quiet}, dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		return readBytes(t, again)
	}
	t.Run("claim gone", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig()
		owner := openLog(t, dir, cfg)
		if err := owner.TakeOver(t0, nil); err != nil {
			t.Fatal(err)
		}
		appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "acked"))
		zombie := openLog(t, dir, cfg) // recovers what is on disk now
		defer zombie.Abandon()
		if err := zombie.TakeOver(t0, func() bool { return false }); !errors.Is(err, ErrStaleTakeOver) {
			t.Fatalf("take-over with a stale claim: %v, want ErrStaleTakeOver", err)
		}
		// Had it sealed the segment, recovery would cut this.
		appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "more"))
		if err := owner.Close(); err != nil {
			t.Fatal(err)
		}
		if got := reopen(t, dir, cfg); !bytes.Contains(got, []byte("acked")) || !bytes.Contains(got, []byte("more")) {
			t.Fatalf("the owner's acknowledged records after a stale take-over: %q", got)
		}
	})
	t.Run("segment changed since recovery", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig()
		owner := openLog(t, dir, cfg)
		if err := owner.TakeOver(t0, nil); err != nil { // the active segment: new and empty
			t.Fatal(err)
		}
		zombie := openLog(t, dir, cfg) // recovered while it was empty
		defer zombie.Abandon()
		appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "acked"))
		if err := zombie.TakeOver(t0, func() bool { return true }); !errors.Is(err, ErrStaleTakeOver) {
			t.Fatalf("take-over of a segment written since recovery: %v, want ErrStaleTakeOver", err)
		}
		appendSync(t, owner, t0, batchOf(t0.UnixMilli(), "more"))
		if err := owner.Close(); err != nil {
			t.Fatal(err)
		}
		if got := reopen(t, dir, cfg); !bytes.Contains(got, []byte("acked")) || !bytes.Contains(got, []byte("more")) {
			t.Fatalf("the owner's acknowledged records after a stale take-over: %q", got)
		}
	})
}
