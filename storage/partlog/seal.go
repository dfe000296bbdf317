package partlog

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Sealing keeps a deposed owner's late writes out of the log (cluster
// mode, issue 10 item 5). A broker whose lease ran out stops starting
// appends, but a write it had already started — a stalled NFS write, a
// process stopped inside the syscall — can still land afterwards, at the
// position it had, in the segment it had open. The new owner therefore
// never appends to a file the previous owner had open:
//
//   - TakeOver records the active segment's length as recovery found it
//     (<base>.sealed, written durably) and rolls to a segment the new
//     owner creates itself; an empty active segment is replaced instead
//     (a late write through the old descriptor lands in an unlinked file);
//   - recovery reads a sealed segment only up to its recorded length, and
//     cuts whatever a late write left after it.
//
// So a late write can neither overwrite what the new owner appends nor
// become visible, nor make a later recovery find overlapping segments.
//
// A take-over is itself a write by a broker that may be paused: one that
// claimed the partition, stopped before opening it, and resumes after its
// lease expired and a peer took the partition and appends to it. Sealing
// or replacing that peer's active segment would cut or unlink what it
// acknowledges (the chaos checker found it: twelve acknowledged records
// gone with a replaced segment). So TakeOver asks mayAct (the claim's
// lease gate) before each write and removal, and refuses when the active
// segment's file is no longer what recovery read (another size, another
// file): someone else is its owner.

// sealSuffix names a segment's seal: its length in bytes, in decimal.
const sealSuffix = ".sealed"

// ErrStaleTakeOver refuses a take-over by an owner whose claim no longer
// holds, or whose recovery no longer matches the files: nothing written.
var ErrStaleTakeOver = errors.New("taking the partition over: the claim no longer holds (another broker owns and writes it); nothing written")

// TakeOver seals the active segment and starts a new one (see above). The
// caller is the partition's new owner, right after Open; mayAct (nil:
// always) says whether its claim still holds.
func (l *Log) TakeOver(now time.Time, mayAct func() bool) error {
	if err := l.failedErr(); err != nil {
		return err
	}
	may := func() error {
		if mayAct != nil && !mayAct() {
			return ErrStaleTakeOver
		}
		return nil
	}
	prev := l.active()
	if err := may(); err != nil {
		return err
	}
	if err := l.asRecovered(prev); err != nil {
		return err
	}
	if prev.size == 0 {
		// Nothing to keep: replace the file, so a write through the old
		// owner's descriptor goes to an unlinked one.
		path := segmentPath(l.dir, prev.base, logSuffix)
		prev.close()
		if err := may(); err != nil {
			return err
		}
		if err := l.env.FS.Remove(path); err != nil {
			l.Fail(err)
			return err
		}
		next, err := createSegment(l.env.FS, l.dir, prev.base, now)
		if err != nil {
			l.Fail(err)
			return err
		}
		l.segments[len(l.segments)-1] = next
	} else {
		seal := []byte(strconv.FormatInt(prev.size, 10) + "\n")
		if err := may(); err != nil {
			return err
		}
		if err := durable.WriteFile(l.env.FS, segmentPath(l.dir, prev.base, sealSuffix), seal); err != nil {
			l.Fail(err)
			return err
		}
		if err := l.roll(now); err != nil {
			return err
		}
	}
	if err := durable.SyncDir(l.env.FS, l.dir); err != nil {
		l.Fail(err)
		return err
	}
	l.env.Logger.Info("took the partition over: sealed the previous owner's segment", "dir", l.dir, "sealed", prev.base, "bytes", prev.size, "new_segment", l.active().base)
	return nil
}

// asRecovered checks that segment s's file is still the one recovery read,
// at the length it read: a file another broker created in its place, or
// appended to since, means the claim is stale (ErrStaleTakeOver).
func (l *Log) asRecovered(s *segment) error {
	f, err := l.env.FS.OpenFile(s.log.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStaleTakeOver, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	id, known := identify(f)
	if fi.Size() != s.alloc || (s.log.known && (!known || id != s.log.id)) {
		return fmt.Errorf("%w: segment %d is %d bytes (recovered at %d), or another file", ErrStaleTakeOver, s.base, fi.Size(), s.alloc)
	}
	// Within preallocated room an append leaves the length as it was:
	// the next batch would start where recovery found the zeros begin.
	if s.alloc > s.size && !zeroTail(f, s.size, min(s.alloc, s.size+BatchHeaderSize)) {
		return fmt.Errorf("%w: segment %d was appended to after its recovery (a batch at byte %d)", ErrStaleTakeOver, s.base, s.size)
	}
	return nil
}

// sealedLength is segment base's sealed length, if it has a seal.
func (l *Log) sealedLength(base int64) (int64, bool) {
	b, err := vfs.ReadFile(l.env.FS, segmentPath(l.dir, base, sealSuffix))
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		l.env.Logger.Warn("ignoring an unreadable segment seal", "dir", l.dir, "segment", base, "content", fmt.Sprintf("%q", b))
		return 0, false
	}
	return n, true
}

func (l *Log) failedErr() error { return l.failed }
