package partlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

// stamped is a batch of one record written by a leader at epoch.
func stamped(epoch int32, value string) []byte {
	b := batchOf(t0.UnixMilli(), value)
	SetPartitionLeaderEpoch(b, epoch)
	return b
}

func readEpochFile(t *testing.T, dir string) (Epochs, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, epochCheckpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	e, err := parseEpochs(b)
	if err != nil {
		t.Fatalf("checkpoint file: %v", err)
	}
	return e, true
}

func wantEpochs(t *testing.T, l *Log, want Epochs) {
	t.Helper()
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs = %v, want %v", got, want)
	}
	if got := l.View().Epochs; !slices.Equal(got, want) {
		t.Fatalf("published epochs = %v, want %v", got, want)
	}
}

// A leader's epoch gets its entry at once, on disk before its first
// batch; reopening, losing or garbling the file, and moving the log start
// all leave the cache agreeing with the log.
func TestLeaderEpochCache(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	if err := l.BecomeLeader(0); err != nil {
		t.Fatal(err)
	}
	l.Publish(l.HighWatermark())
	wantEpochs(t, l, Epochs{{0, 0}})
	if _, ok := readEpochFile(t, dir); ok {
		t.Fatal("an epoch that wrote nothing was written to disk")
	}
	appendSync(t, l, t0, stamped(0, "a"), stamped(0, "b"))
	if e, _ := readEpochFile(t, dir); !slices.Equal(e, Epochs{{0, 0}}) {
		t.Fatalf("on disk after the first batch: %v", e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A new leader at epoch 3, from the log end.
	l = openLog(t, dir, testConfig())
	wantEpochs(t, l, Epochs{{0, 0}})
	if err := l.BecomeLeader(3); err != nil {
		t.Fatal(err)
	}
	appendSync(t, l, t0, stamped(3, "c"), stamped(3, "d"), stamped(3, "e"))
	wantEpochs(t, l, Epochs{{0, 0}, {3, 2}})
	if e, _ := readEpochFile(t, dir); !slices.Equal(e, Epochs{{0, 0}, {3, 2}}) {
		t.Fatalf("on disk: %v", e)
	}
	if epoch, end := l.View().Epochs.EndOffsetFor(0, l.View().EndOffset); epoch != 0 || end != 2 {
		t.Fatalf("end of epoch 0 = (%d, %d), want (0, 2)", epoch, end)
	}
	if epoch, end := l.View().Epochs.EndOffsetFor(3, l.View().EndOffset); epoch != 3 || end != 5 {
		t.Fatalf("end of epoch 3 = (%d, %d), want (3, 5)", epoch, end)
	}
	// A batch of a newer epoch than the leader's (as Apache's append):
	// a new entry, on disk before the batch.
	appendSync(t, l, t0, stamped(4, "f"))
	wantEpochs(t, l, Epochs{{0, 0}, {3, 2}, {4, 5}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	full := Epochs{{0, 0}, {3, 2}, {4, 5}}

	// Deleted, then garbled: rebuilt from the batch headers.
	for _, damage := range []func(path string) error{
		os.Remove,
		func(path string) error { return os.WriteFile(path, []byte("0\n7\n1 2\n"), 0o644) },
	} {
		if err := damage(filepath.Join(dir, epochCheckpointFile)); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, dir, testConfig())
		wantEpochs(t, l, full)
		if e, _ := readEpochFile(t, dir); !slices.Equal(e, full) {
			t.Fatalf("the rebuilt cache was not saved: %v", e)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The log start moves past epoch 0's batches: epoch 3 starts there.
	l = openLog(t, dir, testConfig())
	if err := l.DeleteRecordsBefore(3, nil); err != nil {
		t.Fatal(err)
	}
	l.Publish(l.HighWatermark())
	trimmed := Epochs{{3, 3}, {4, 5}}
	wantEpochs(t, l, trimmed)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if e, _ := readEpochFile(t, dir); !slices.Equal(e, trimmed) {
		t.Fatalf("on disk after close: %v", e)
	}
	l = openLog(t, dir, testConfig())
	wantEpochs(t, l, trimmed)
}

// An entry past the log end (the leader's, before it wrote anything) is
// dropped when the log is opened again, as Apache's truncateFromEnd at
// load: the next leader replaces it.
func TestLeaderEpochCacheEmptyEpochReplaced(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	_ = l.BecomeLeader(1)
	appendSync(t, l, t0, stamped(1, "a"))
	_ = l.BecomeLeader(2) // took over, wrote nothing
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, testConfig())
	_ = l.BecomeLeader(3)
	appendSync(t, l, t0, stamped(3, "b"))
	wantEpochs(t, l, Epochs{{1, 0}, {3, 1}})
}

// A failed checkpoint write is final for the log, like a failed fsync:
// the batch of the new epoch is not written.
func TestLeaderEpochCacheWriteFailure(t *testing.T) {
	efs := errorfs.Wrap(vfs.OS)
	dir := filepath.Join(t.TempDir(), "t-0")
	l, err := Open(durable.Env{FS: efs, DataDir: filepath.Dir(dir), Logger: quiet}, dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_ = l.BecomeLeader(0)
	efs.Set(errorfs.Always(errorfs.On(errorfs.Sync, ""), syscall.EIO))
	if _, err := l.Append(stamped(0, "a"), t0); err == nil {
		t.Fatal("append succeeded although the epoch checkpoint could not be written")
	}
	efs.Set(nil)
	if l.Failed() == nil || l.EndOffset() != 0 {
		t.Fatalf("failed = %v, end = %d: want offline with nothing written", l.Failed(), l.EndOffset())
	}
	if _, err := l.Append(stamped(0, "b"), t0); !errors.Is(err, ErrOffline) {
		t.Fatalf("append after the failure: %v", err)
	}
}

// TestLeaderEpochCrashLoop changes leaders, appends, syncs, deletes
// records and restarts on the in-memory filesystem, simulates a power
// loss, recovers, and checks that the cache agrees with the log: every
// readable batch's epoch is the one the cache gives its offset, and no
// entry lies outside the log.
func TestLeaderEpochCrashLoop(t *testing.T) { memfs.Rounds(t, 60, epochCrashRound) }

func epochCrashRound(t *testing.T, r *rand.Rand) {
	m := memfs.New()
	if err := durable.MkdirAll(m, "/data"); err != nil {
		t.Fatal(err)
	}
	env := durable.Env{FS: m, DataDir: "/data", Logger: quiet}
	cfg := testConfig()
	cfg.SegmentBytes = int64(300 + r.IntN(2000))
	dir := "/data/t-0"
	epoch := int32(0)
	open := func(fs vfs.FS) *Log {
		env.FS = fs
		l, err := Open(env, dir, cfg)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if err := l.BecomeLeader(epoch); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open(m)
	for i := 0; i < 20+r.IntN(150); i++ {
		switch n := r.IntN(20); {
		case n < 12:
			if _, err := l.Append(stamped(epoch, fmt.Sprint(i)), t0); err != nil {
				t.Fatal(err)
			}
		case n < 16:
			if j := l.PrepareSync(); j != nil {
				if err := j.Run(); err != nil {
					t.Fatal(err)
				}
				l.Advance(j)
			}
		case n < 17:
			epoch++ // a new owner: it recovers the log as a restart does
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = open(m)
		case n < 18 && l.HighWatermark() > 0:
			if err := l.DeleteRecordsBefore(r.Int64N(l.HighWatermark()+1), nil); err != nil {
				t.Fatal(err)
			}
		case n < 19:
			if err := l.Checkpoint(); err != nil {
				t.Fatal(err)
			}
		default:
			epoch++
			_ = l.BecomeLeader(epoch) // a leader change without a restart
		}
	}
	crashed := m.Crash(memfs.CrashOptions{Rand: r})
	_ = l.Close()
	if r.IntN(4) == 0 {
		_ = crashed.Remove(dir + "/" + epochCheckpointFile) // rebuilt from the batches
	}
	epoch++
	rl := open(crashed)
	defer rl.Close()
	rl.Publish(rl.HighWatermark())
	v := rl.View()
	for _, x := range v.Epochs {
		if x.StartOffset < v.LogStart || x.StartOffset > v.EndOffset {
			t.Fatalf("entry %v outside the log [%d, %d]: %v", x, v.LogStart, v.EndOffset, v.Epochs)
		}
	}
	err := v.ForEachBatch(v.LogStart, v.HighWatermark, func(b []byte) bool {
		h, _ := ParseBatchHeader(b)
		if got, _ := v.Epochs.EpochForOffset(h.BaseOffset); got != h.PartitionLeaderEpoch {
			t.Fatalf("batch %d was written at epoch %d, the cache says %d: %v\n%s", h.BaseOffset, h.PartitionLeaderEpoch, got, v.Epochs, crashed.Dump())
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}
