// Package memfs is an in-memory vfs.FS that can simulate a power loss.
//
// Every file remembers what its last successful Sync made durable, and
// every directory which of the entries created, renamed or removed in it a
// directory Sync made durable. Crash returns a new filesystem holding only
// that durable state — as a machine that lost power would find its disk —
// optionally with some of the unsynced writes and directory changes that a
// real kernel may have written back on its own: a random part of each
// file's unsynced tail (with zeroed holes where pages never reached the
// disk) and a random prefix of the unsynced directory changes, in order
// (a journaling filesystem commits them in order). Model: pebble's
// MemFS.CrashClone, kfake's persist_fs.go.
package memfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kaas/storage/vfs"
)

// FS is the in-memory filesystem. Safe for concurrent use.
type FS struct {
	mu   sync.Mutex
	root *node
	// ops is every directory change since the filesystem was created, in
	// order; Crash replays the durable ones.
	ops []nsOp
}

var _ vfs.FS = (*FS)(nil)

// New returns an empty filesystem holding only the root directory "/".
func New() *FS {
	return &FS{root: newDir()}
}

type node struct {
	dir bool
	// Directories.
	children map[string]*node
	// syncedOps: every change to this directory's entries with an index
	// below it is durable (the number of ops when it was last synced).
	syncedOps int
	// Files. The durable content is syncedCopy when set, else
	// data[:syncedLen]: appends leave the durable prefix in place, and a
	// write below syncedLen or a truncation copies it out first.
	data       []byte
	syncedLen  int
	syncedCopy []byte
	modTime    time.Time
}

func newDir() *node { return &node{dir: true, children: map[string]*node{}} }

func (n *node) durable() []byte {
	if n.syncedCopy != nil {
		return n.syncedCopy
	}
	return n.data[:n.syncedLen]
}

// touchBelow is called before bytes at or after off change.
func (n *node) touchBelow(off int) {
	if off < n.syncedLen && n.syncedCopy == nil {
		n.syncedCopy = slices.Clone(n.data[:n.syncedLen])
		if n.syncedCopy == nil {
			n.syncedCopy = []byte{}
		}
	}
}

type opKind int

const (
	opLink   opKind = iota // dir.children[name] = n
	opUnlink               // delete(dir.children, name)
	opRename               // dir.children[name] -> to.children[toName]
)

type nsOp struct {
	kind   opKind
	dir    *node
	name   string
	n      *node
	to     *node
	toName string
}

func (o nsOp) durable(i int) bool {
	if o.dir.syncedOps <= i {
		return false
	}
	return o.kind != opRename || o.to.syncedOps > i
}

func split(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

func pathErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// lookup returns the node at name, or nil.
func (m *FS) lookup(name string) *node {
	n := m.root
	for _, part := range split(name) {
		if !n.dir {
			return nil
		}
		n = n.children[part]
		if n == nil {
			return nil
		}
	}
	return n
}

// parent returns the directory holding name and name's last element.
func (m *FS) parent(op, name string) (*node, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", pathErr(op, name, fs.ErrInvalid)
	}
	dir := m.root
	for _, part := range parts[:len(parts)-1] {
		dir = dir.children[part]
		if dir == nil {
			return nil, "", pathErr(op, name, fs.ErrNotExist)
		}
		if !dir.dir {
			return nil, "", pathErr(op, name, syscall.ENOTDIR)
		}
	}
	return dir, parts[len(parts)-1], nil
}

func (m *FS) record(o nsOp) { m.ops = append(m.ops, o) }

// OpenFile opens or creates a file (O_CREATE, O_EXCL, O_TRUNC, O_APPEND,
// O_RDONLY, O_WRONLY, O_RDWR).
func (m *FS) OpenFile(name string, flag int, _ fs.FileMode) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	n := dir.children[base]
	switch {
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case n == nil:
		n = &node{modTime: time.Now()}
		dir.children[base] = n
		m.record(nsOp{kind: opLink, dir: dir, name: base, n: n})
	case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	if flag&os.O_TRUNC != 0 && !n.dir {
		n.touchBelow(0)
		n.data = n.data[:0]
		n.modTime = time.Now()
	}
	return &file{fs: m, n: n, name: name, flag: flag}, nil
}

// OpenDir opens a directory for Sync.
func (m *FS) OpenDir(name string) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(name)
	if n == nil {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	if !n.dir {
		return nil, pathErr("open", name, syscall.ENOTDIR)
	}
	return &file{fs: m, n: n, name: name}, nil
}

// ReadDir lists a directory, sorted by name.
func (m *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(name)
	if n == nil {
		return nil, pathErr("readdir", name, fs.ErrNotExist)
	}
	if !n.dir {
		return nil, pathErr("readdir", name, syscall.ENOTDIR)
	}
	out := make([]fs.DirEntry, 0, len(n.children))
	for child, c := range n.children {
		out = append(out, fs.FileInfoToDirEntry(info(child, c)))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// Stat describes name.
func (m *FS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.lookup(name)
	if n == nil {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return info(path.Base(path.Clean("/"+name)), n), nil
}

// Rename moves oldpath to newpath, replacing a file there.
func (m *FS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	from, fromName, err := m.parent("rename", oldpath)
	if err != nil {
		return err
	}
	n := from.children[fromName]
	if n == nil {
		return pathErr("rename", oldpath, fs.ErrNotExist)
	}
	to, toName, err := m.parent("rename", newpath)
	if err != nil {
		return err
	}
	if old := to.children[toName]; old != nil && old.dir && len(old.children) > 0 {
		return pathErr("rename", newpath, syscall.ENOTEMPTY)
	}
	delete(from.children, fromName)
	to.children[toName] = n
	m.record(nsOp{kind: opRename, dir: from, name: fromName, n: n, to: to, toName: toName})
	return nil
}

// Remove removes a file or an empty directory.
func (m *FS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := dir.children[base]
	if n == nil {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.children) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	delete(dir.children, base)
	m.record(nsOp{kind: opUnlink, dir: dir, name: base})
	return nil
}

// RemoveAll removes name and everything under it.
func (m *FS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("removeall", name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if dir.children[base] == nil {
		return nil
	}
	delete(dir.children, base)
	m.record(nsOp{kind: opUnlink, dir: dir, name: base})
	return nil
}

// Mkdir creates a directory.
func (m *FS) Mkdir(name string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.parent("mkdir", name)
	if err != nil {
		return err
	}
	if dir.children[base] != nil {
		return pathErr("mkdir", name, fs.ErrExist)
	}
	n := newDir()
	n.modTime = time.Now()
	dir.children[base] = n
	m.record(nsOp{kind: opLink, dir: dir, name: base, n: n})
	return nil
}

// CrashOptions say how much of what was not synced survives a Crash.
type CrashOptions struct {
	// Rand decides; nil keeps nothing unsynced (the strict model).
	Rand *rand.Rand
}

// Crash returns the filesystem a restart after a power loss at this
// instant would find. The receiver is left as it was (the "dead" process
// may go on writing to it; nothing it does reaches the clone).
func (m *FS) Crash(opts CrashOptions) *FS {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := opts.Rand
	cut := 0 // unsynced directory changes before cut survive
	if r != nil {
		cut = r.IntN(len(m.ops) + 1)
	}
	clones := map[*node]*node{m.root: newDir()}
	clone := func(n *node) *node {
		if c, ok := clones[n]; ok {
			return c
		}
		var c *node
		if n.dir {
			c = newDir()
		} else {
			c = &node{data: crashContent(n, r), modTime: n.modTime}
			c.syncedLen = len(c.data)
		}
		c.modTime = n.modTime
		clones[n] = c
		return c
	}
	for i, o := range m.ops {
		if !o.durable(i) && i >= cut {
			continue
		}
		d := clone(o.dir)
		switch o.kind {
		case opLink:
			d.children[o.name] = clone(o.n)
		case opUnlink:
			delete(d.children, o.name)
		case opRename:
			if d.children[o.name] != clone(o.n) {
				// The entry this rename moved is not there after the
				// crash (its creation was lost): nothing to move.
				continue
			}
			delete(d.children, o.name)
			clone(o.to).children[o.toName] = clone(o.n)
		}
	}
	out := &FS{root: clones[m.root]}
	// Everything in the clone is durable as it stands.
	var walk func(n *node, path string)
	walk = func(n *node, p string) {
		for name, c := range n.children {
			out.ops = append(out.ops, nsOp{kind: opLink, dir: n, name: name, n: c})
			if c.dir {
				walk(c, p+"/"+name)
			}
		}
	}
	walk(out.root, "")
	var mark func(n *node)
	mark = func(n *node) {
		n.syncedOps = len(out.ops)
		for _, c := range n.children {
			if c.dir {
				mark(c)
			}
		}
	}
	mark(out.root)
	return out
}

// crashContent is a file's content after a crash: what was synced, and
// with r, maybe part of the unsynced tail, with zeroed 4 KiB pages where
// the kernel had not written back.
func crashContent(n *node, r *rand.Rand) []byte {
	synced := slices.Clone(n.durable())
	if r == nil || n.syncedCopy != nil || len(n.data) <= n.syncedLen {
		return synced
	}
	extra := n.data[n.syncedLen:]
	keep := r.IntN(len(extra) + 1)
	out := append(synced, extra[:keep]...)
	if r.IntN(2) == 0 {
		const page = 4096
		for p := (n.syncedLen / page) * page; p < len(out); p += page {
			if p+page <= n.syncedLen || r.IntN(3) != 0 {
				continue
			}
			for i := max(p, n.syncedLen); i < min(p+page, len(out)); i++ {
				out[i] = 0
			}
		}
	}
	return out
}

// ReadFile returns a file's current content (tests).
func (m *FS) ReadFile(name string) ([]byte, error) { return vfs.ReadFile(m, name) }

// WriteFile replaces a file's content, already durable (tests setting up
// or damaging a data directory).
func (m *FS) WriteFile(name string, data []byte) error {
	f, err := m.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// Dump lists every file and its size (test failure messages).
func (m *FS) Dump() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var walk func(n *node, p string)
	walk = func(n *node, p string) {
		names := make([]string, 0, len(n.children))
		for name := range n.children {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c := n.children[name]
			if c.dir {
				fmt.Fprintf(&b, "%s/%s/\n", p, name)
				walk(c, p+"/"+name)
			} else {
				fmt.Fprintf(&b, "%s/%s %d (synced %d)\n", p, name, len(c.data), len(c.durable()))
			}
		}
	}
	walk(m.root, "")
	return b.String()
}

// file is an open handle.
type file struct {
	fs     *FS
	n      *node
	name   string
	flag   int
	pos    int64
	closed bool
}

func (f *file) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if f.n.dir {
		return pathErr(op, f.name, syscall.EISDIR)
	}
	if write && f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *file) Name() string { return f.name }

func (f *file) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) writeAt(p []byte, off int64) {
	n := f.n
	n.touchBelow(int(off))
	if end := int(off) + len(p); end > len(n.data) {
		n.data = append(n.data, make([]byte, end-len(n.data))...)
	}
	copy(n.data[off:], p)
	n.modTime = time.Now()
}

func (f *file) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.n.data))
	}
	f.writeAt(p, f.pos)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if f.flag&os.O_APPEND != 0 {
		return 0, pathErr("write", f.name, errors.New("WriteAt on a file opened with O_APPEND"))
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.writeAt(p, off)
	return len(p), nil
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("seek", false); err != nil {
		return 0, err
	}
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += int64(len(f.n.data))
	}
	if offset < 0 {
		return 0, pathErr("seek", f.name, fs.ErrInvalid)
	}
	f.pos = offset
	return offset, nil
}

func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	n := f.n
	if int(size) < len(n.data) {
		n.touchBelow(int(size))
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, int(size)-len(n.data))...)
	}
	n.modTime = time.Now()
	return nil
}

func (f *file) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, fs.ErrClosed)
	}
	if f.n.dir {
		f.n.syncedOps = len(f.fs.ops)
		return nil
	}
	f.n.syncedLen = len(f.n.data)
	f.n.syncedCopy = nil
	return nil
}

func (f *file) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return info(path.Base(path.Clean("/"+f.name)), f.n), nil
}

func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

type fileInfo struct {
	name    string
	size    int64
	dir     bool
	modTime time.Time
}

func info(name string, n *node) fs.FileInfo {
	return fileInfo{name: name, size: int64(len(n.data)), dir: n.dir, modTime: n.modTime}
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) ModTime() time.Time { return i.modTime }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// Iterations is how many rounds a randomized crash test runs: n in
// `make test`, 50 times more under `make soak` (KAAS_SOAK=1).
func Iterations(n int) int {
	if os.Getenv("KAAS_SOAK") != "" {
		return 50 * n
	}
	return n
}

// Rounds runs fn as Iterations(n) subtests, each with its own random
// source, named by its seed: KAAS_SEED=<seed> replays a failed one first.
func Rounds(t *testing.T, n int, fn func(t *testing.T, r *rand.Rand)) {
	base := uint64(time.Now().UnixNano())
	if s := os.Getenv("KAAS_SEED"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
	}
	for i := 0; i < Iterations(n); i++ {
		seed := base + uint64(i)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { fn(t, rand.New(rand.NewPCG(seed, seed>>32))) })
	}
}
