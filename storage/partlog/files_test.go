package partlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
)

// descriptorsUnder counts this process's open descriptors on files under
// dir (directories included), read from /proc: what the kernel holds,
// not what the cache believes.
func descriptorsUnder(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("needs /proc:", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) || target == dir {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds (generous deadline: the machine is
// shared and slow).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fastFileSweep makes unused files close within milliseconds for the
// test.
func fastFileSweep(t *testing.T) {
	prev := SetFileIdle(5 * time.Millisecond)
	t.Cleanup(func() { SetFileIdle(prev) })
}

func TestIdleLogHoldsNoDescriptors(t *testing.T) {
	fastFileSweep(t)
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	now := time.Now()
	appendSync(t, l, now, batchOf(1, "a"), batchOf(2, "b"))
	if err := l.AppendAborted(AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 1}); err != nil {
		t.Fatal(err)
	}
	sync(t, l)
	waitFor(t, "the idle log's files to close", func() bool { return descriptorsUnder(t, dir) == 0 })

	// Reads and appends reopen what they need.
	if got := readAll(t, l.View(), 0); len(got) != 2 {
		t.Fatalf("read %v after the files closed", got)
	}
	appendSync(t, l, now, batchOf(3, "c"))
	if got := readAll(t, l.View(), 0); len(got) != 3 {
		t.Fatalf("read %v after appending to a reopened segment", got)
	}
	waitFor(t, "the files to close again", func() bool { return descriptorsUnder(t, dir) == 0 })
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, testConfig())
	if got := readAll(t, l2.View(), 0); len(got) != 3 {
		t.Fatalf("after a restart read %v", got)
	}
	if a := l2.View().AbortedTxns(0, 10); len(a) != 1 {
		t.Fatalf("aborted transactions after a restart: %v", a)
	}
}

// A file with writes no fsync covered is never closed by the cache: only
// a file that was closed clean may be reopened for the next fsync.
func TestUnsyncedFilesStayOpen(t *testing.T) {
	fastFileSweep(t)
	dir := t.TempDir()
	l := openLog(t, dir, testConfig())
	if _, err := l.Append(batchOf(1, "a"), time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // ten sweeps: the file would be closed by now
	if n := descriptorsUnder(t, dir); n != 1 {
		t.Fatalf("%d descriptors under the log with an unsynced append, want the segment's 1", n)
	}
	sync(t, l)
	waitFor(t, "the synced file to close", func() bool { return descriptorsUnder(t, dir) == 0 })
}

func TestOpenFilesStayUnderTheCap(t *testing.T) {
	prev := SetMaxOpenFiles(4)
	t.Cleanup(func() { SetMaxOpenFiles(prev) })
	root := t.TempDir()
	var logs []*Log
	for i := range 12 {
		dir := filepath.Join(root, "p"+string(rune('a'+i)))
		l := openLog(t, dir, testConfig())
		appendSync(t, l, time.Now(), batchOf(int64(i), "x"))
		logs = append(logs, l)
	}
	if n := descriptorsUnder(t, root); n > 4 {
		t.Fatalf("%d descriptors open, cap 4", n)
	}
	for round := range 3 {
		for i, l := range logs {
			if got := readAll(t, l.View(), 0); len(got) != 1 {
				t.Fatalf("round %d, log %d: read %v", round, i, got)
			}
			if n := descriptorsUnder(t, root); n > 4 {
				t.Fatalf("%d descriptors open, cap 4", n)
			}
		}
	}
}

// A failed fsync is final for the log even when the file is closed and
// reopened: the latch is the log's, and a clean reopen never brings it
// back.
func TestFsyncFailureIsFinalAcrossReopen(t *testing.T) {
	fastFileSweep(t)
	dir := t.TempDir()
	efs := errorfs.Wrap(vfs.OS)
	l, err := Open(durable.Env{DataDir: dir, Logger: quiet, FS: efs}, dir, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	appendSync(t, l, time.Now(), batchOf(1, "a"))
	waitFor(t, "the idle segment to close", func() bool { return descriptorsUnder(t, dir) == 0 })

	// The append reopens the segment; its fsync fails.
	efs.Set(func(op errorfs.Op) error {
		if op.Kind == errorfs.Sync && strings.HasSuffix(op.Path, logSuffix) {
			return syscall.EIO
		}
		return nil
	})
	if _, err := l.Append(batchOf(2, "b"), time.Now()); err != nil {
		t.Fatal(err)
	}
	runErr := l.PrepareSync().Run()
	if !errors.Is(runErr, syscall.EIO) {
		t.Fatalf("fsync: %v, want EIO", runErr)
	}
	l.Fail(runErr)
	efs.Set(nil) // the disk "recovers"

	// The failed file stays open (its writes were never covered) and the
	// log stays offline, whatever the cache does meanwhile.
	time.Sleep(50 * time.Millisecond)
	if n := descriptorsUnder(t, dir); n != 1 {
		t.Fatalf("%d descriptors open after the failed fsync, want the segment's 1", n)
	}
	if _, err := l.Append(batchOf(3, "c"), time.Now()); !errors.Is(err, ErrOffline) {
		t.Fatalf("append after the failure: %v, want ErrOffline", err)
	}
	if j := l.PrepareSync(); j != nil {
		t.Fatal("an offline log prepared another sync")
	}
	if hw := l.HighWatermark(); hw != 1 {
		t.Fatalf("high watermark %d after the failure, want 1 (only the first batch was durable)", hw)
	}
}

// A deleted segment stays readable through an older view for the
// deletion delay, even when the cache closed its file before it went.
func TestDeletedSegmentReadableThroughOlderView(t *testing.T) {
	fastFileSweep(t)
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SegmentBytes = 1 // every batch rolls
	cfg.FileDeleteDelay = time.Hour
	l := openLog(t, dir, cfg)
	appendSync(t, l, time.Now(), batchOf(1, "a"), batchOf(2, "b"), batchOf(3, "c"))
	old := l.View()
	waitFor(t, "the idle segments to close", func() bool { return descriptorsUnder(t, dir) == 0 })
	if err := l.DeleteRecordsBefore(2, nil); err != nil {
		t.Fatal(err)
	}
	sync(t, l)
	if got := readAll(t, old, 0); len(got) != 3 {
		t.Fatalf("the older view read %v", got)
	}
	if _, err := os.Stat(segmentPath(dir, 0, logSuffix)); !os.IsNotExist(err) {
		t.Fatalf("the deleted segment's file is still there: %v", err)
	}
}

// Fetches read while the cache closes and reopens files under them and
// the actor appends: no read fails, none sees a closed descriptor.
func TestReadsRaceTheCache(t *testing.T) {
	fastFileSweep(t)
	prev := SetMaxOpenFiles(2)
	t.Cleanup(func() { SetMaxOpenFiles(prev) })
	root := t.TempDir()
	var logs []*Log
	for i := range 6 {
		l := openLog(t, filepath.Join(root, "p"+string(rune('a'+i))), testConfig())
		appendSync(t, l, time.Now(), batchOf(1, "a"))
		logs = append(logs, l)
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				for _, l := range logs {
					v := l.View()
					if _, err := v.Read(0, 1<<20, v.HighWatermark); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	for i := range 50 {
		for _, l := range logs {
			appendSync(t, l, time.Now(), batchOf(int64(i+2), "b"))
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal("a read failed while the cache closed files:", err)
		}
	}
}

// A file created where a removed one was usually gets the removed file's
// inode number back on ext4 (what a takeover of an empty active segment
// does to a deposed owner's reopen): identify still tells the two apart,
// by the inode's generation. Skipped where the file system keeps no
// generation (tmpfs) or never reused the number.
func TestIdentityTellsAReusedInodeApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	create := func() fileID {
		f, err := vfs.OS.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		id, ok := identify(f)
		if !ok {
			t.Fatal("no identity for a file on the OS file system")
		}
		return id
	}
	for range 50 {
		old := create()
		if !old.hasGen {
			t.Skip("this file system keeps no inode generation")
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		replacement := create()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if replacement.dev == old.dev && replacement.ino == old.ino {
			if replacement == old {
				t.Fatalf("a new file with the removed one's inode number %d has the same identity", old.ino)
			}
			return
		}
	}
	t.Skip("the file system never reused an inode number")
}
