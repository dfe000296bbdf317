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
// replaceSegments, with one manifest for the whole pass instead of .swap
// files), on the actor with nothing but directory operations and a few
// fsyncs:
//
//  1. the pass wrote every new segment's files under .cleaned names
//     (<base>.log.<tag>.cleaned, its .index, .timeindex and .txnindex)
//     and fsynced them (clean.go);
//  2. <base>.swap, the manifest, lists the offset ranges [from, to)
//     replaced and the tag; it is written durably (tmp, fsync, rename,
//     directory fsync). This is the commit point;
//  3. every old segment's files in those ranges are removed, directory
//     fsync (a reader holding an old view keeps reading them through
//     their pinned descriptors, file.delete.delay.ms);
//  4. each new segment's files are renamed into place, its .log first;
//     directory fsync;
//  5. the manifest is removed.
//
// Recovery (finishSwaps, before anything else is opened) replays a swap
// whose manifest it finds: for each range whose new .log is still under
// its .cleaned name, step 3 is done again (the removals of step 3 were
// durable before any rename, so a range already renamed is left alone),
// then every .cleaned file of the tag is renamed into place. Without a
// manifest, .cleaned files are a pass that never committed: removed. So a
// crash at any point leaves the old segments or the new ones, never both,
// never a gap.

const swapSuffix = ".swap"

func swapPath(dir string, from int64) string { return segmentPath(dir, from, swapSuffix) }

type swapRange struct{ from, to int64 }

func encodeSwap(tag string, ranges []swapRange) []byte {
	line := tag
	for _, r := range ranges {
		line += fmt.Sprintf(" %d %d", r.from, r.to)
	}
	return []byte(fmt.Sprintf("2 %s %08x\n", line, crc32.Checksum([]byte(line), crc32c)))
}

func parseSwap(b []byte) (tag string, ranges []swapRange, err error) {
	f := strings.Fields(string(b))
	if len(f) < 5 || f[0] != "2" || len(f)%2 != 1 {
		return "", nil, errors.New("not a version 2 swap manifest")
	}
	line := strings.Join(f[1:len(f)-1], " ")
	if want, perr := strconv.ParseUint(f[len(f)-1], 16, 32); perr != nil || uint32(want) != crc32.Checksum([]byte(line), crc32c) {
		return "", nil, errors.New("checksum mismatch")
	}
	for i := 2; i+1 < len(f)-1; i += 2 {
		from, err1 := strconv.ParseInt(f[i], 10, 64)
		to, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || from < 0 || to < from {
			return "", nil, errors.New("bad offsets")
		}
		ranges = append(ranges, swapRange{from, to})
	}
	return f[1], ranges, nil
}

// InstallCleaned swaps a finished pass's segments in, on the actor. The
// groups whose old segments are all still there (retention or
// DeleteRecords may have taken some meanwhile) up to the first that is
// not are installed, the rest dropped; mayAct (nil: always) is asked
// before each step, and a pass stopped by it before its manifest leaves
// its files to the next recovery. A failure, or a stop after the
// manifest, takes the log offline: the segment set on disk is then the
// next recovery's to finish. It returns how many groups were installed.
func (l *Log) InstallCleaned(r *CleanResult, mayAct func() bool) (int, error) {
	if l.failed != nil {
		return 0, ErrOffline
	}
	may := func() bool { return mayAct == nil || mayAct() }
	if !may() {
		return 0, ErrCleanStale
	}
	var install []cleanedGroup
	complete := true
	for gi, g := range r.groups {
		if g.unchanged {
			removeCleaned(l.env.FS, l.dir, g)
			continue
		}
		if l.indexOfRun(g.old) < 0 {
			for _, rest := range r.groups[gi:] {
				removeCleaned(l.env.FS, l.dir, rest)
			}
			complete = false
			break
		}
		install = append(install, g)
	}
	r.groups = nil
	if len(install) > 0 {
		if err := l.swapGroups(install, may); err != nil {
			l.Fail(err)
			return 0, err
		}
	}
	if complete && r.endOffset > l.cleanedTo {
		l.cleanedTo = r.endOffset
	}
	l.nextHorizon = r.nextHorizon
	l.checkpointDue, l.installed = true, true // the next pass writes it (cleanerOffsetFile)
	return len(install), nil
}

// DiscardCleaned removes the files of a pass that will not be installed.
func (l *Log) DiscardCleaned(r *CleanResult) {
	for _, g := range r.groups {
		removeCleaned(l.env.FS, l.dir, g)
	}
	r.groups = nil
}

func (g cleanedGroup) path(dir, suffix string) string { return cleanedPath(dir, g.from, suffix, g.tag) }

func removeCleaned(fsys vfs.FS, dir string, g cleanedGroup) {
	for _, suf := range g.suffixes {
		_ = fsys.Remove(g.path(dir, suf))
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

func (l *Log) swapGroups(groups []cleanedGroup, may func() bool) error {
	fsys := l.env.FS
	ranges := make([]swapRange, len(groups))
	for i, g := range groups {
		ranges[i] = swapRange{g.from, g.to}
	}
	manifest := swapPath(l.dir, groups[0].from)
	if err := durable.WriteFile(fsys, manifest, encodeSwap(groups[0].tag, ranges)); err != nil {
		return err
	}
	if !may() {
		return ErrCleanStale
	}
	for _, g := range groups {
		for _, s := range g.old {
			l.retire(s)
		}
	}
	if err := durable.SyncDir(fsys, l.dir); err != nil {
		return err
	}
	if !may() {
		return ErrCleanStale
	}
	for _, g := range groups {
		for _, suf := range g.suffixes {
			if err := fsys.Rename(g.path(l.dir, suf), segmentPath(l.dir, g.from, suf)); err != nil {
				return err
			}
		}
	}
	if err := durable.SyncDir(fsys, l.dir); err != nil {
		return err
	}
	for _, g := range groups {
		seg := g.seg
		logPath := segmentPath(l.dir, seg.base, logSuffix)
		f, err := fsys.OpenFile(logPath, os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		seg.log = newSegFile(fsys, logPath, os.O_RDWR, f)
		if len(seg.aborted) > 0 {
			path := segmentPath(l.dir, seg.base, txnIndexSuffix)
			flag := os.O_RDWR | os.O_APPEND
			tf, err := fsys.OpenFile(path, flag, 0o644)
			if err != nil {
				return err
			}
			seg.txn = newSegFile(fsys, path, flag, tf)
		}
		at := l.indexOfRun(g.old)
		segs := make([]*segment, 0, len(l.segments)-len(g.old)+1)
		segs = append(segs, l.segments[:at]...)
		segs = append(segs, seg)
		segs = append(segs, l.segments[at+len(g.old):]...)
		l.segments = segs
	}
	if err := fsys.Remove(manifest); err != nil {
		return err
	}
	l.dirtyDir = true
	l.env.Logger.Info("cleaned segments swapped in", "dir", l.dir, "from", groups[0].from, "to", groups[len(groups)-1].to, "groups", len(groups))
	return nil
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
		tag, ranges, err := parseSwap(b)
		if err != nil {
			// Written whole (tmp and rename) or not at all: unreadable is damage.
			return env.Corrupt(storeName, path, 0, "unreadable swap manifest: "+err.Error())
		}
		env.Logger.Warn("finishing an interrupted cleaner swap", "dir", dir, "ranges", len(ranges))
		for _, r := range ranges {
			if !vfs.Exists(fsys, cleanedPath(dir, r.from, logSuffix, tag)) {
				continue // renamed already: its old files went before
			}
			for _, old := range entries {
				if base, ok := segmentFileBase(old.Name()); ok && base >= r.from && base < r.to {
					if err := fsys.Remove(filepath.Join(dir, old.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
						return err
					}
				}
			}
		}
		if err := durable.SyncDir(fsys, dir); err != nil {
			return err
		}
		for _, r := range ranges {
			for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
				if c := cleanedPath(dir, r.from, suf, tag); vfs.Exists(fsys, c) {
					if err := fsys.Rename(c, segmentPath(dir, r.from, suf)); err != nil {
						return err
					}
				}
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
