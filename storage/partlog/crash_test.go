package partlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/vfs/memfs"
)

// TestCrashLoop appends, syncs, rolls, checkpoints, deletes and restarts a
// log on the in-memory filesystem, simulates a power loss at a random
// point (keeping a random part of what was not fsynced), recovers, and
// checks: recovery never mistakes a crash for corruption, every batch
// acknowledged (covered by a finished sync) is there with its offsets and
// bytes, nothing half-written is visible, and appends go on after the
// recovered end.
func TestCrashLoop(t *testing.T) { memfs.Rounds(t, 80, crashRound) }

type ackedBatch struct {
	base  int64
	bytes []byte
}

func crashRound(t *testing.T, r *rand.Rand) {
	m := memfs.New()
	if err := durable.MkdirAll(m, "/data"); err != nil {
		t.Fatal(err)
	}
	env := durable.Env{FS: m, DataDir: "/data", Logger: quiet}
	cfg := testConfig()
	cfg.SegmentBytes = int64(300 + r.IntN(3000))
	cfg.IndexIntervalBytes = int64(1 + r.IntN(500))
	// One round in four writes large batches into large segments, so that
	// flush windows outgrow the preallocated room (segment.go) and the file
	// is extended by its batches alone, as at full rate.
	valueSize := 200
	if r.IntN(4) == 0 {
		cfg.SegmentBytes = int64(64<<10 + r.IntN(512<<10))
		valueSize = 40 << 10
	}
	dir := "/data/t-0"
	l, err := Open(env, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var acked, pending []ackedBatch
	logStart := int64(0)
	ops := 20 + r.IntN(200)
	for i := 0; i < ops; i++ {
		switch n := r.IntN(20); {
		case n < 12:
			vals := make([]string, 1+r.IntN(4))
			for j := range vals {
				vals[j] = fmt.Sprintf("%d-%d-%s", i, j, bytes.Repeat([]byte{'v'}, r.IntN(valueSize)))
			}
			b := batchOf(t0.UnixMilli()+int64(i), vals...)
			h, err := l.Append(b, t0)
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, ackedBatch{h.BaseOffset, b})
		case n < 17:
			if j := l.PrepareSync(); j != nil {
				if err := j.Run(); err != nil {
					t.Fatal(err)
				}
				l.Advance(j)
				acked, pending = append(acked, pending...), nil
			}
		case n < 18:
			if err := l.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		case n < 19 && len(pending) == 0 && l.HighWatermark() > 0:
			off := r.Int64N(l.HighWatermark() + 1)
			if err := l.DeleteRecordsBefore(off, nil); err != nil {
				t.Fatal(err)
			}
			logStart = max(logStart, off)
		default:
			// A clean restart: Close fsyncs everything.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			acked, pending = append(acked, pending...), nil
			if l, err = Open(env, dir, cfg); err != nil {
				t.Fatalf("reopen after a clean close: %v", err)
			}
		}
	}
	crashed := m.Crash(memfs.CrashOptions{Rand: r})
	_ = l.Close() // the dead process goes on; nothing reaches the clone
	env.FS = crashed
	rl, err := Open(env, dir, cfg)
	if err != nil {
		t.Fatalf("recovery after a crash failed (a crash must never look like corruption): %v\n%s", err, crashed.Dump())
	}
	defer rl.Close()
	v := rl.View()
	if v.LogStart < logStart {
		t.Fatalf("log start %d went back below %d", v.LogStart, logStart)
	}
	for _, a := range acked {
		h, _ := ParseBatchHeader(a.bytes)
		if h.NextOffset() <= v.LogStart {
			continue
		}
		data, err := v.Read(max(a.base, v.LogStart), 1, v.HighWatermark)
		if err != nil {
			t.Fatalf("reading acknowledged batch %d: %v\n%s", a.base, err, crashed.Dump())
		}
		got, _ := SplitBatches(data)
		if len(got) == 0 || !bytes.Equal(got[0], a.bytes) {
			t.Fatalf("acknowledged batch at %d lost or changed (end %d, start %d)\n%s", a.base, v.HighWatermark, v.LogStart, crashed.Dump())
		}
	}
	// Everything visible is whole and contiguous.
	for off := v.LogStart; off < v.HighWatermark; {
		data, err := v.Read(off, 1, v.HighWatermark)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := SplitBatches(data)
		if err != nil || len(bs) == 0 || !ValidCRC(bs[0]) {
			t.Fatalf("batch at %d: %v", off, err)
		}
		h, _ := ParseBatchHeader(bs[0])
		off = h.NextOffset()
	}
	end := rl.EndOffset()
	after := batchOf(t0.UnixMilli(), "after")
	h := appendSync(t, rl, t0, after)
	if h[0].BaseOffset != end {
		t.Fatalf("append after recovery at %d, want %d", h[0].BaseOffset, end)
	}
	// That append went into whatever room recovery kept (the zeros
	// preallocated before the crash): a second power loss keeps it, at
	// its offset, and the log goes on after it.
	again := crashed.Crash(memfs.CrashOptions{Rand: r})
	env.FS = again
	rl2, err := Open(env, dir, cfg)
	if err != nil {
		t.Fatalf("recovery after a second crash failed: %v\n%s", err, again.Dump())
	}
	defer rl2.Close()
	v2 := rl2.View()
	SetBaseOffset(after, end) // appendSync appended a copy
	data, err := v2.Read(end, 1, v2.HighWatermark)
	if got, _ := SplitBatches(data); err != nil || len(got) == 0 || !bytes.Equal(got[0], after) {
		t.Fatalf("the batch acknowledged after the first recovery (offset %d) is lost or changed after the second: %v\n%s", end, err, again.Dump())
	}
	if rl2.EndOffset() != end+1 {
		t.Fatalf("end offset %d after the second crash, want %d", rl2.EndOffset(), end+1)
	}
}
