package partlog

import (
	"fmt"
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

// sealSuffix names a segment's seal: its length in bytes, in decimal.
const sealSuffix = ".sealed"

// TakeOver seals the active segment and starts a new one (see above). The
// caller is the partition's new owner, right after Open.
func (l *Log) TakeOver(now time.Time) error {
	if err := l.failedErr(); err != nil {
		return err
	}
	prev := l.active()
	if prev.size == 0 {
		// Nothing to keep: replace the file, so a write through the old
		// owner's descriptor goes to an unlinked one.
		path := segmentPath(l.dir, prev.base, logSuffix)
		prev.close()
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
