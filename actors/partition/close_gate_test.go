package partition

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/storage/partlog"
	"kaas/storage/partlog/batchtest"
)

// activeSegmentSize is the length of the last segment file in dir.
func activeSegmentSize(t *testing.T, dir string) int64 {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segments in %s (%v)", dir, err)
	}
	fi, err := os.Stat(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// openGated opens a partition in dir whose lease gate is alive's value
// (true now) and appends one record to it.
func openGated(t *testing.T, dir string) (*fixture, *atomic.Bool) {
	t.Helper()
	alive := new(atomic.Bool)
	alive.Store(true)
	f := open(t, dir, func(c *Config) { c.Gate = alive.Load })
	if r := wait(t, f.produce(batchtest.Plain(1, "a"), -1)); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	return f, alive
}

func noCleanMarker(t *testing.T, dir, when string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, ".clean-shutdown")); err == nil {
		t.Fatalf("%s left a clean-shutdown marker: a peer's active segment would be trusted", when)
	}
}

// A graceful hand-off (Retire) whose lease fell in doubt before the actor
// closed the log writes nothing into the directory — no cut room, no
// clean-shutdown marker — as an abandon: a peer may own it already.
func TestRetireWhoseLeaseWentWritesNothing(t *testing.T) {
	dir := t.TempDir()
	f, alive := openGated(t, dir)
	size := activeSegmentSize(t, dir)
	alive.Store(false)
	f.h.Retire()
	noCleanMarker(t, dir, "a retire whose lease went")
	if got := activeSegmentSize(t, dir); got != size {
		t.Fatalf("a retire whose lease went changed the active segment from %d to %d bytes (cut its room)", size, got)
	}
	if err := f.h.closeErr.Load(); err == nil || !errors.Is(*err, partlog.ErrClosedInDoubt) {
		t.Fatalf("close error %v, want ErrClosedInDoubt", err)
	}
}

// A take-over refused as stale (its claim's lease went before it wrote)
// leaves the directory, which a peer may own and write, as it found it:
// it used to close the log cleanly, cutting the peer's room and leaving a
// clean-shutdown marker that made the peer's active segment trusted.
func TestRefusedTakeOverWritesNothing(t *testing.T) {
	dir := t.TempDir()
	owner := open(t, dir)
	if r := wait(t, owner.produce(batchtest.Plain(1, "owner"), -1)); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	size := activeSegmentSize(t, dir)
	// The stale claimant is another broker: another actor system.
	sys := system.New(quiet())
	defer sys.Shutdown()
	stale := func() error {
		_, err := Open(sys, Config{Topic: "t", Partition: 0, Dir: dir, Log: testLogConfig(), MaxMessageBytes: 1 << 20,
			Logger: quiet(), TakeOver: true, LeaderEpoch: 1, Gate: func() bool { return false }})
		return err
	}()
	if !errors.Is(stale, partlog.ErrStaleTakeOver) {
		t.Fatalf("stale take-over: %v, want ErrStaleTakeOver", stale)
	}
	noCleanMarker(t, dir, "a refused take-over")
	if got := activeSegmentSize(t, dir); got != size {
		t.Fatalf("a refused take-over changed the owner's active segment from %d to %d bytes", size, got)
	}
	if r := wait(t, owner.produce(batchtest.Plain(1, "still the owner"), -1)); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("the owner's next produce: %+v", r)
	}
}

// A deleted topic's partition whose lease went before the actor closed
// leaves its directory in place: directories are named by topic and
// partition, and a peer may have opened the one of this name for the
// topic created again, with records it acknowledged.
func TestDeleteWhoseLeaseWentLeavesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	f, alive := openGated(t, dir)
	size := activeSegmentSize(t, dir)
	alive.Store(false)
	if err := f.h.Stop(true); !errors.Is(err, partlog.ErrClosedInDoubt) {
		t.Fatalf("stop: %v, want ErrClosedInDoubt", err)
	}
	if got := activeSegmentSize(t, dir); got != size {
		t.Fatalf("a delete whose lease went changed the active segment from %d to %d bytes", size, got)
	}
	noCleanMarker(t, dir, "a delete whose lease went")
}

// With its lease, a deleted topic's partition removes its directory.
func TestDeleteRemovesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	f, _ := openGated(t, dir)
	if err := f.h.Stop(true); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the deleted partition's directory is still there (%v)", err)
	}
}

// The minute's checkpoint of a partition whose lease fell in doubt
// writes no recovery point (nor indexes): a peer may own the directory,
// and a recovery point of this broker's view would replace the peer's.
func TestCheckpointWhoseLeaseWentWritesNothing(t *testing.T) {
	dir := t.TempDir()
	f, alive := openGated(t, dir)
	f.h.Periodic(messages.Checkpoint{})
	if r := wait(t, f.produce(batchtest.Plain(1, "b"), -1)); r.ErrorCode != 0 {
		t.Fatalf("produce: %+v", r)
	}
	rp := filepath.Join(dir, "recovery-point")
	before, err := os.ReadFile(rp)
	if err != nil {
		t.Fatalf("no recovery point after a checkpoint with the lease: %v", err)
	}
	alive.Store(false)
	f.h.Periodic(messages.Checkpoint{})
	if err := f.h.Stop(false); !errors.Is(err, partlog.ErrClosedInDoubt) {
		t.Fatalf("stop: %v, want ErrClosedInDoubt", err) // after the checkpoint, in mailbox order
	}
	if after, err := os.ReadFile(rp); err != nil || string(after) != string(before) {
		t.Fatalf("a checkpoint whose lease went rewrote the recovery point: %q, was %q (%v)", after, before, err)
	}
}
