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
// files). Every fsync is the pass's, off the actor; the actor only
// renames and removes, as Apache does under the log's lock:
//
//  1. the pass writes every new segment's files under .cleaned names
//     (<base>.log.<tag>.cleaned, its .index, .timeindex and .txnindex)
//     and fsyncs them (clean.go), then the manifest, <base>.swap.<tag>.cleaned
//     (the offset ranges [from, to) replaced and the tag), fsynced too
//     (writeManifest);
//  2. the actor renames the manifest to <base>.swap: the commit point;
//  3. every old segment's files in those ranges are removed (a reader
//     holding an old view keeps reading them through their pinned
//     descriptors, file.delete.delay.ms);
//  4. each new segment's files are renamed into place, its .log first;
//  5. the manifest is removed. The directory's fsync is the next group
//     commit's (dirtyDir), off the actor too.
//
// No fsync orders these steps: as Apache's (its .swap renames, the old
// files' renames to .deleted and the renames into place follow each
// other with one directory flush at the end), the swap relies on the
// file system keeping a directory's changes in the order they were made
// (a journaling file system commits them in order; an NFS server commits
// each before it answers; memfs's power loss keeps a prefix of them). A
// crash then keeps a prefix of steps 2–5, and whatever prefix it keeps,
// recovery (finishSwaps, before anything else is opened) ends with the old
// segments or the new ones: without a committed manifest, .cleaned files
// are a pass that never committed, removed (the pass's fsyncs made the
// new files whole before the commit, but the commit may be lost: the old
// segments are untouched until it). With one, for each range whose new
// .log is still under its .cleaned name, step 3 is done again (every
// removal came before the first rename, so a range already renamed is
// left alone), then every .cleaned file of the tag is renamed into place.
// So a crash at any point leaves the old segments or the new ones, never
// both, never a gap.

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

// InstallCleaned swaps a finished pass's segments in, on the actor,
// with renames and removals only. If a segment the pass replaces is gone
// (retention or DeleteRecords took the log's head meanwhile) the pass is
// dropped whole: the next one starts from the log as it is. mayAct (nil:
// always) is asked before the commit and after it: a pass stopped before
// its commit leaves its files to the next recovery, and a failure, or a
// stop after the commit, takes the log offline: the segment set on disk
// is then the next recovery's to finish. It returns how many groups were
// installed.
func (l *Log) InstallCleaned(r *CleanResult, mayAct func() bool) (int, error) {
	if l.failed != nil {
		return 0, ErrOffline
	}
	may := func() bool { return mayAct == nil || mayAct() }
	if !may() {
		return 0, ErrCleanStale
	}
	var install []cleanedGroup
	for _, g := range r.groups {
		if g.unchanged {
			continue // nothing written for it
		}
		if l.indexOfRun(g.old) < 0 {
			l.DiscardCleaned(r)
			return 0, nil
		}
		install = append(install, g)
	}
	if len(install) > 0 {
		if err := l.swapGroups(install, r.manifest, may); err != nil {
			l.Fail(err)
			return 0, err
		}
	}
	r.groups, r.manifest = nil, ""
	if r.endOffset > l.cleanedTo {
		l.cleanedTo = r.endOffset
	}
	l.nextHorizon = r.nextHorizon
	l.checkpointDue, l.installed = true, true // the next pass writes it (cleanerOffsetFile)
	return len(install), nil
}

// DiscardCleaned removes the files of a pass that will not be installed.
func (l *Log) DiscardCleaned(r *CleanResult) { r.removeFiles(l.env) }

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

// swapGroups commits the pass whose manifest, under its uncommitted name,
// is pending, and does steps 3 to 5.
func (l *Log) swapGroups(groups []cleanedGroup, pending string, may func() bool) error {
	fsys := l.env.FS
	manifest := swapPath(l.dir, groups[0].from)
	if err := fsys.Rename(pending, manifest); err != nil {
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
	for _, g := range groups {
		for _, suf := range g.suffixes {
			if err := fsys.Rename(g.path(l.dir, suf), segmentPath(l.dir, g.from, suf)); err != nil {
				return err
			}
		}
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
	l.dirtyDir = true // the next group commit fsyncs the directory
	l.env.Logger.Info("cleaned segments swapped in", "dir", l.dir, "from", groups[0].from, "to", groups[len(groups)-1].to, "groups", len(groups))
	return nil
}

// writeManifest writes the pass's swap manifest (the ranges of the groups
// that changed) under its uncommitted name and fsyncs it: the install
// commits the pass with one rename.
func (p *CleanPlan) writeManifest(res *CleanResult, may func() error) error {
	var ranges []swapRange
	for _, g := range res.groups {
		if !g.unchanged {
			ranges = append(ranges, swapRange{g.from, g.to})
		}
	}
	if len(ranges) == 0 {
		return nil
	}
	if err := may(); err != nil {
		return err
	}
	res.manifest = cleanedPath(p.dir, ranges[0].from, swapSuffix, p.tag)
	if err := writeSynced(p.env, res.manifest, encodeSwap(p.tag, ranges)); err != nil {
		return fmt.Errorf("writing the swap manifest: %w", err)
	}
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
