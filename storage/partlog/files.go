package partlog

import (
	"errors"
	"io/fs"
	"os"
	stdsync "sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"kaas/storage/vfs"
)

// Segment files are opened on demand and closed when idle, so an idle
// partition holds no descriptor: with two per partition (the active
// segment and the directory) 10,000 partitions took the whole of a
// 20,000-descriptor limit. Apache keeps every segment open; kaas must
// scale to 100,000 partitions on one box. So:
//
//   - a segFile opens its file at its first read, write, sync or stat,
//     and any number of calls share the descriptor;
//   - one process-wide cache (the descriptor limit is the process's)
//     closes the files nobody used for a whole sweep interval, and, over
//     its cap, the ones least recently used (second chance);
//   - a file with writes no successful fsync covered is never closed
//     (only by the log's own Close or Abandon): a writeback error on a
//     file that nobody has open can vanish with its inode, so an fsync on
//     a reopened descriptor could succeed without covering the data. A
//     file is closed clean, and what a later fsync through a new
//     descriptor reports concerns writes made through that one. The
//     write-failure latch is the Log's (Log.failed), not the descriptor's:
//     closing and reopening can never bring an offline log back.
//
// The directory is opened for each fsync it needs (durable.SyncDir):
// entries change only when a segment rolls or goes.

// segFile is one segment file (.log or .txnindex) opened on demand. Its
// methods are safe from any goroutine: the partition actor writes and
// syncs it, fetches read it through views, the cache closes it.
//
// Every partition has one, idle or not: the small fields are packed (112
// bytes, where 128 were taken).
type segFile struct {
	fsys vfs.FS
	path string
	flag int32 // to reopen it: never O_CREATE
	slot int32 // index in files.open while f != nil (under files.mu)

	// id is the file the segFile was made for (device and inode), to
	// refuse a reopen that finds another file at the path; known (below)
	// is false where the file system gives no identity (memfs).
	id fileID

	mu     stdsync.Mutex
	f      vfs.File // nil while closed
	users  int      // calls in progress, and a retired segment's pin
	writes uint64   // writes and truncations made
	synced uint64   // writes a successful Sync covered
	gone   bool     // closed for good: its log closed or it was deleted
	known  bool
	// used is set by every call and cleared by the cache's sweeps.
	used atomic.Bool
}

// errFileClosed is what a read of a segment closed for good gets (a view
// older than a deletion's delay, or a closed log).
var errFileClosed = errors.New("segment file closed")

// ErrSegmentReplaced is what a reopen gets when the path now names another
// file: in a cluster, a broker that took the partition over replaced an
// empty active segment with its own at the same name. The deposed owner's
// late write must fail (and take its log offline) rather than land in the
// new owner's segment.
var ErrSegmentReplaced = errors.New("segment file replaced by another owner")

// fileID identifies a file across opens: device and inode number, and
// the inode's generation where the file system keeps one (ext4, xfs,
// btrfs). The number alone is not enough: ext4 hands a freed inode number
// to the next file created, so the new owner's segment, created right
// after the deposed owner's empty one was removed, usually has the very
// same device and inode number (200 times out of 200 on this project's
// ext4); its generation differs. Where there is no generation (tmpfs, NFS:
// the ioctl fails), dev and inode are what we have — tmpfs does not reuse
// numbers that soon, and on NFS the removed file's handle goes stale.
type fileID struct {
	dev, ino uint64
	gen      uint32
	hasGen   bool
}

// identify returns f's identity, if its file system has one.
func identify(f vfs.File) (fileID, bool) {
	fi, err := f.Stat()
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		id.gen, id.hasGen = inodeGeneration(fd.Fd())
	}
	return id, true
}

// newSegFile wraps f, just opened (or created) at path with flag.
func newSegFile(fsys vfs.FS, path string, flag int, f vfs.File) *segFile {
	h := &segFile{fsys: fsys, path: path, flag: int32(flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC)), slot: -1}
	h.id, h.known = identify(f)
	h.mu.Lock()
	h.f = f
	h.used.Store(true)
	files.add(h)
	h.mu.Unlock()
	files.trim(h)
	return h
}

// acquire returns the open file, opening it if needed; release must
// follow. gen is the number of writes made so far.
func (h *segFile) acquire() (f vfs.File, gen uint64, err error) {
	h.mu.Lock()
	if h.f == nil {
		if h.gone {
			h.mu.Unlock()
			return nil, 0, &fs.PathError{Op: "read", Path: h.path, Err: errFileClosed}
		}
		f, err := h.fsys.OpenFile(h.path, int(h.flag), 0o644)
		if err != nil {
			h.mu.Unlock()
			return nil, 0, err
		}
		if id, ok := identify(f); h.known && (!ok || id != h.id) {
			_ = f.Close()
			h.mu.Unlock()
			return nil, 0, &fs.PathError{Op: "reopen", Path: h.path, Err: ErrSegmentReplaced}
		}
		h.f = f
		files.add(h)
		defer files.trim(h) // after h.mu is released: trim locks other files
	}
	h.users++
	h.used.Store(true)
	f, gen = h.f, h.writes
	h.mu.Unlock()
	return f, gen, nil
}

// release ends a call; wrote says it changed the file.
func (h *segFile) release(wrote bool) {
	h.mu.Lock()
	h.users--
	if wrote {
		h.writes++
	}
	if h.gone && h.users == 0 {
		h.closeLocked()
	}
	h.mu.Unlock()
}

// closeIdle closes the descriptor if nobody is using it and every write
// is fsynced; it reports whether the file is closed.
func (h *segFile) closeIdle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.users > 0 || h.writes != h.synced {
		return h.f == nil
	}
	h.closeLocked()
	return true
}

func (h *segFile) closeLocked() error {
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	files.remove(h)
	return err
}

// close closes the file for good (at once, or when the last call in
// progress ends); later calls fail with errFileClosed.
func (h *segFile) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone = true
	if h.users > 0 {
		return nil
	}
	return h.closeLocked()
}

// pin keeps the file open until close (a deleted segment that fetches
// holding an older view may still read); false if it could not be opened.
func (h *segFile) pin() bool {
	_, _, err := h.acquire()
	return err == nil
}

// unpin ends a pin and closes the file for good.
func (h *segFile) unpin() {
	h.mu.Lock()
	h.gone = true
	h.mu.Unlock()
	h.release(false)
}

// Name is the file's path.
func (h *segFile) Name() string { return h.path }

func (h *segFile) ReadAt(p []byte, off int64) (int, error) {
	f, _, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release(false)
	return f.ReadAt(p, off)
}

func (h *segFile) WriteAt(p []byte, off int64) (int, error) {
	f, _, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release(true)
	return f.WriteAt(p, off)
}

// Write appends (the file is opened O_APPEND).
func (h *segFile) Write(p []byte) (int, error) {
	f, _, err := h.acquire()
	if err != nil {
		return 0, err
	}
	defer h.release(true)
	return f.Write(p)
}

func (h *segFile) Truncate(size int64) error {
	f, _, err := h.acquire()
	if err != nil {
		return err
	}
	defer h.release(true)
	return f.Truncate(size)
}

func (h *segFile) Stat() (fs.FileInfo, error) {
	f, _, err := h.acquire()
	if err != nil {
		return nil, err
	}
	defer h.release(false)
	return f.Stat()
}

// Sync fsyncs the file. Only a success marks the writes made before it
// as covered (and the file closable); after a failure the file stays open
// until its log closes, and the log is offline anyway.
func (h *segFile) Sync() error {
	f, gen, err := h.acquire()
	if err != nil {
		return err
	}
	err = f.Sync()
	h.mu.Lock()
	if err == nil && gen > h.synced {
		h.synced = gen
	}
	h.mu.Unlock()
	h.release(false)
	return err
}

// fileCache is the process-wide set of open segment files.
type fileCache struct {
	mu    stdsync.Mutex
	open  []*segFile
	hand  int // where the next eviction scan starts
	limit int
	idle  time.Duration
	timer *time.Timer // the idle sweep, armed while open is not empty
}

// files is the cache. Its limit defaults to a quarter of the descriptor
// limit, leaving the rest to connections and the other stores.
var files = &fileCache{limit: defaultOpenFiles(), idle: 10 * time.Second}

func defaultOpenFiles() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 4096
	}
	return max(64, int(min(r.Cur, 1<<30)/4))
}

// SetMaxOpenFiles caps the segment files open at once (0: the default,
// a quarter of the descriptor limit) and returns the previous cap.
// Files in use or with writes not yet fsynced stay open beyond it.
func SetMaxOpenFiles(n int) int {
	if n <= 0 {
		n = defaultOpenFiles()
	}
	files.mu.Lock()
	prev := files.limit
	files.limit = n
	files.mu.Unlock()
	files.trim(nil)
	return prev
}

// SetFileIdle sets how long an unused segment file stays open (between
// one and two sweeps of this period) and returns the previous period.
func SetFileIdle(d time.Duration) time.Duration {
	files.mu.Lock()
	defer files.mu.Unlock()
	prev := files.idle
	files.idle = d
	if files.timer != nil {
		files.timer.Reset(d)
	}
	return prev
}

// OpenFiles is the number of segment files open now (a gauge).
func OpenFiles() int {
	files.mu.Lock()
	defer files.mu.Unlock()
	return len(files.open)
}

// add registers h, just opened (caller holds h.mu).
func (c *fileCache) add(h *segFile) {
	c.mu.Lock()
	h.slot = int32(len(c.open))
	c.open = append(c.open, h)
	if c.timer == nil {
		c.timer = time.AfterFunc(c.idle, c.sweep)
	}
	c.mu.Unlock()
}

// remove forgets h, just closed (caller holds h.mu).
func (c *fileCache) remove(h *segFile) {
	c.mu.Lock()
	if i := h.slot; i >= 0 {
		last := len(c.open) - 1
		c.open[i] = c.open[last]
		c.open[i].slot = i
		c.open[last] = nil
		c.open = c.open[:last]
		h.slot = -1
	}
	if len(c.open) == 0 && c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.mu.Unlock()
}

// trim closes files beyond the limit, least recently used first (a
// clock: a file used since the hand last passed gets a second chance),
// never busy, which is in use by the caller. Candidates are chosen
// under c.mu and closed after it is released (a file's lock is taken
// before the cache's, never inside it); a few spares stand in for
// candidates found in use or with unsynced writes.
func (c *fileCache) trim(busy *segFile) {
	c.mu.Lock()
	over := len(c.open) - c.limit
	if over <= 0 {
		c.mu.Unlock()
		return
	}
	var victims []*segFile
	for scanned := 0; scanned < 2*len(c.open) && len(victims) < over+8; scanned++ {
		if c.hand >= len(c.open) {
			c.hand = 0
		}
		h := c.open[c.hand]
		c.hand++
		if h != busy && !h.used.Swap(false) {
			victims = append(victims, h)
		}
	}
	c.mu.Unlock()
	for _, h := range victims {
		if over == 0 {
			break
		}
		if h.closeIdle() {
			over--
		}
	}
}

// sweep closes the files unused since the last sweep.
func (c *fileCache) sweep() {
	c.mu.Lock()
	var idle []*segFile
	for _, h := range c.open {
		if !h.used.Swap(false) {
			idle = append(idle, h)
		}
	}
	c.mu.Unlock()
	for _, h := range idle {
		h.closeIdle()
	}
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Reset(c.idle)
	}
	c.mu.Unlock()
}
