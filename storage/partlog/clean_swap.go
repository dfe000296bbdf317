package partlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Installing a pass's segments, crash-atomically (Apache's
// replaceSegments, with a manifest instead of .swap files):
//
//  1. the pass wrote <base>.log.<tag>.cleaned (and its .txnindex) and
//     fsynced them (clean.go);
//  2. <base>.swap, the manifest, names the offsets replaced [from, to)
//     and the tag; it is written durably (tmp, fsync, rename, directory
//     fsync). This is the commit point;
//  3. every old segment's files in [from, to) are removed, directory
//     fsync (a reader holding an old view keeps reading them through
//     their pinned descriptors, file.delete.delay.ms);
//  4. the new .log is renamed into place, then its .txnindex, directory
//     fsync; its indexes are written;
//  5. the manifest is removed.
//
// Recovery (finishSwaps, before anything else is opened) replays a swap
// whose manifest it finds: while the new .log is still under its
// .cleaned name, steps 3 and 4 are done again; once it is in place, only
// a .txnindex still to rename is left. Without a manifest, .cleaned
// files are a pass that never committed: removed. So a crash at any
// point leaves the old segments or the new one, never both, never a gap.

const swapSuffix = ".swap"

func swapPath(dir string, from int64) string { return segmentPath(dir, from, swapSuffix) }

func encodeSwap(from, to int64, tag string) []byte {
	line := fmt.Sprintf("%d %d %s", from, to, tag)
	return []byte(fmt.Sprintf("1 %s %08x\n", line, crc32.Checksum([]byte(line), crc32c)))
}

func parseSwap(b []byte) (from, to int64, tag string, err error) {
	f := strings.Fields(string(b))
	if len(f) != 5 || f[0] != "1" {
		return 0, 0, "", errors.New("not a version 1 swap manifest")
	}
	line := strings.Join(f[1:4], " ")
	if want, perr := strconv.ParseUint(f[4], 16, 32); perr != nil || uint32(want) != crc32.Checksum([]byte(line), crc32c) {
		return 0, 0, "", errors.New("checksum mismatch")
	}
	from, err1 := strconv.ParseInt(f[1], 10, 64)
	to, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || from < 0 || to < from {
		return 0, 0, "", errors.New("bad offsets")
	}
	return from, to, f[3], nil
}

// InstallCleaned swaps a finished pass's segments in, on the actor. A
// group whose old segments are no longer all there (retention or
// DeleteRecords took some meanwhile) is dropped with every later one;
// mayAct (nil: always) is asked before each step, and a pass stopped by
// it before its manifest leaves its files to the next recovery. A
// failure, or a stop after the manifest, takes the log offline: the
// segment set on disk is then the next recovery's to finish. It returns
// how many groups were installed.
func (l *Log) InstallCleaned(r *CleanResult, mayAct func() bool) (int, error) {
	if l.failed != nil {
		return 0, ErrOffline
	}
	may := func() bool { return mayAct == nil || mayAct() }
	installed := 0
	complete := true
	for gi, g := range r.groups {
		if g.unchanged {
			if !may() {
				return installed, ErrCleanStale
			}
			removeCleaned(l.env.FS, g)
			continue
		}
		at := l.indexOfRun(g.old)
		if at < 0 {
			if !may() {
				return installed, ErrCleanStale
			}
			for _, rest := range r.groups[gi:] {
				removeCleaned(l.env.FS, rest)
			}
			complete = false
			break
		}
		if !may() {
			return installed, ErrCleanStale
		}
		if err := l.swapGroup(g, at, may); err != nil {
			l.Fail(err)
			return installed, err
		}
		installed++
	}
	r.groups = nil
	if complete && r.endOffset > l.cleanedTo {
		l.cleanedTo = r.endOffset
	}
	l.nextHorizon = r.nextHorizon
	if err := l.persistCleanerOffset(); err != nil {
		l.Fail(err)
		return installed, err
	}
	return installed, nil
}

// DiscardCleaned removes the files of a pass that will not be installed.
func (l *Log) DiscardCleaned(r *CleanResult) {
	for _, g := range r.groups {
		removeCleaned(l.env.FS, g)
	}
	r.groups = nil
}

func removeCleaned(fsys vfs.FS, g cleanedGroup) {
	_ = fsys.Remove(g.logPath)
	if g.txnPath != "" {
		_ = fsys.Remove(g.txnPath)
	}
}

// indexOfRun is where the segments run starts in the live set, -1 if
// they are not all there, in order.
func (l *Log) indexOfRun(run []*segment) int {
	for i, s := range l.segments {
		if s != run[0] {
			continue
		}
		if i+len(run) >= len(l.segments) { // never the active segment
			return -1
		}
		for k, o := range run {
			if l.segments[i+k] != o {
				return -1
			}
		}
		return i
	}
	return -1
}

func (l *Log) swapGroup(g cleanedGroup, at int, may func() bool) error {
	fsys := l.env.FS
	if err := durable.WriteFile(fsys, swapPath(l.dir, g.from), encodeSwap(g.from, g.to, tagOf(g))); err != nil {
		return err
	}
	if !may() {
		return ErrCleanStale
	}
	for _, s := range g.old {
		l.retire(s)
	}
	if err := durable.SyncDir(fsys, l.dir); err != nil {
		return err
	}
	if !may() {
		return ErrCleanStale
	}
	seg := g.seg
	logPath := segmentPath(l.dir, seg.base, logSuffix)
	if err := fsys.Rename(g.logPath, logPath); err != nil {
		return err
	}
	if g.txnPath != "" {
		if err := fsys.Rename(g.txnPath, segmentPath(l.dir, seg.base, txnIndexSuffix)); err != nil {
			return err
		}
	}
	if err := durable.SyncDir(fsys, l.dir); err != nil {
		return err
	}
	f, err := fsys.OpenFile(logPath, os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	seg.log = newSegFile(fsys, logPath, os.O_RDWR, f)
	if g.txnPath != "" {
		path := segmentPath(l.dir, seg.base, txnIndexSuffix)
		flag := os.O_RDWR | os.O_APPEND
		tf, err := fsys.OpenFile(path, flag, 0o644)
		if err != nil {
			return err
		}
		seg.txn = newSegFile(fsys, path, flag, tf)
	}
	if !may() {
		return ErrCleanStale
	}
	if err := seg.writeIndexes(fsys); err != nil {
		return err
	}
	if err := fsys.Remove(swapPath(l.dir, g.from)); err != nil {
		return err
	}
	l.dirtyDir = true
	segs := make([]*segment, 0, len(l.segments)-len(g.old)+1)
	segs = append(segs, l.segments[:at]...)
	segs = append(segs, seg)
	segs = append(segs, l.segments[at+len(g.old):]...)
	l.segments = segs
	l.env.Logger.Info("cleaned segments swapped in", "dir", l.dir, "from", g.from, "to", g.to, "replaced", len(g.old), "bytes", seg.size)
	return nil
}

// tagOf recovers a group's tag from its file name.
func tagOf(g cleanedGroup) string {
	name := strings.TrimSuffix(filepath.Base(g.logPath), cleanedSuffix)
	return name[strings.LastIndexByte(name, '.')+1:]
}

// finishSwaps completes or discards interrupted swaps in dir (see above);
// it runs before the segments are listed.
func finishSwaps(env durable.Env, dir string) error {
	fsys := env.FS
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	changed := false
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, swapSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		b, err := vfs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		from, to, tag, err := parseSwap(b)
		if err != nil {
			// Written whole (tmp and rename) or not at all: unreadable is damage.
			return env.Corrupt(storeName, path, 0, "unreadable swap manifest: "+err.Error())
		}
		logC := cleanedPath(dir, from, logSuffix, tag)
		if vfs.Exists(fsys, logC) {
			env.Logger.Warn("finishing an interrupted cleaner swap", "dir", dir, "from", from, "to", to)
			for _, old := range entries {
				if base, ok := segmentFileBase(old.Name()); ok && base >= from && base < to {
					if err := fsys.Remove(filepath.Join(dir, old.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
						return err
					}
				}
			}
			if err := durable.SyncDir(fsys, dir); err != nil {
				return err
			}
			if err := fsys.Rename(logC, segmentPath(dir, from, logSuffix)); err != nil {
				return err
			}
		}
		if txnC := cleanedPath(dir, from, txnIndexSuffix, tag); vfs.Exists(fsys, txnC) {
			if err := fsys.Rename(txnC, segmentPath(dir, from, txnIndexSuffix)); err != nil {
				return err
			}
		}
		if err := durable.SyncDir(fsys, dir); err != nil {
			return err
		}
		if err := fsys.Remove(path); err != nil {
			return err
		}
		changed = true
	}
	// .cleaned files left: passes that never committed.
	entries, err = fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), cleanedSuffix) {
			_ = fsys.Remove(filepath.Join(dir, e.Name()))
			changed = true
		}
	}
	if changed {
		return durable.SyncDir(fsys, dir)
	}
	return nil
}

// segmentFileBase parses <20 digits><segment suffix>.
func segmentFileBase(name string) (int64, bool) {
	if len(name) <= 20 {
		return 0, false
	}
	suffix := name[20:]
	known := false
	for _, s := range segmentSuffixes {
		known = known || s == suffix
	}
	if !known {
		return 0, false
	}
	base, err := strconv.ParseInt(name[:20], 10, 64)
	return base, err == nil
}
