// Package errorfs wraps a vfs.FS and injects errors into its operations:
// EIO on the Nth fsync, ENOSPC on writes, short writes. The injector can be
// swapped while the filesystem is in use, so a test starts a broker on a
// healthy disk and breaks it at the moment it chooses. Model: pebble's
// vfs/errorfs.
package errorfs

import (
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"kaas/storage/vfs"
)

// Kind is the kind of operation.
type Kind int

const (
	Open Kind = iota
	Read
	Write // Write and WriteAt
	Sync  // file fsync
	SyncDir
	Truncate
	Rename
	Remove
	Mkdir
	ReadDir
	Stat
)

var kindNames = [...]string{"open", "read", "write", "sync", "syncdir", "truncate", "rename", "remove", "mkdir", "readdir", "stat"}

func (k Kind) String() string { return kindNames[k] }

// Op is one operation about to run.
type Op struct {
	Kind Kind
	Path string
	// Len is the byte count of a Write.
	Len int
}

// ShortWrite makes a Write store only N bytes and then fail with Err.
type ShortWrite struct {
	N   int
	Err error
}

func (s *ShortWrite) Error() string { return s.Err.Error() }
func (s *ShortWrite) Unwrap() error { return s.Err }

// Injector decides whether an operation fails: nil lets it run.
type Injector func(Op) error

// FS is the wrapping filesystem.
type FS struct {
	inner vfs.FS
	inj   atomic.Pointer[Injector]
}

var _ vfs.FS = (*FS)(nil)

// Wrap returns inner with injection (none until Set).
func Wrap(inner vfs.FS) *FS { return &FS{inner: inner} }

// Set replaces the injector; nil stops injecting.
func (e *FS) Set(inj Injector) {
	if inj == nil {
		e.inj.Store(nil)
		return
	}
	e.inj.Store(&inj)
}

func (e *FS) check(op Op) error {
	if p := e.inj.Load(); p != nil {
		if err := (*p)(op); err != nil {
			if _, short := err.(*ShortWrite); short {
				return err
			}
			return &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
		}
	}
	return nil
}

func (e *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if err := e.check(Op{Kind: Open, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: e, kind: Sync}, nil
}

func (e *FS) OpenDir(name string) (vfs.File, error) {
	if err := e.check(Op{Kind: Open, Path: name}); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: e, kind: SyncDir}, nil
}

func (e *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := e.check(Op{Kind: ReadDir, Path: name}); err != nil {
		return nil, err
	}
	return e.inner.ReadDir(name)
}

func (e *FS) Stat(name string) (fs.FileInfo, error) {
	if err := e.check(Op{Kind: Stat, Path: name}); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

func (e *FS) Rename(oldpath, newpath string) error {
	if err := e.check(Op{Kind: Rename, Path: oldpath}); err != nil {
		return err
	}
	return e.inner.Rename(oldpath, newpath)
}

func (e *FS) Remove(name string) error {
	if err := e.check(Op{Kind: Remove, Path: name}); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

func (e *FS) RemoveAll(name string) error {
	if err := e.check(Op{Kind: Remove, Path: name}); err != nil {
		return err
	}
	return e.inner.RemoveAll(name)
}

func (e *FS) Mkdir(name string, perm fs.FileMode) error {
	if err := e.check(Op{Kind: Mkdir, Path: name}); err != nil {
		return err
	}
	return e.inner.Mkdir(name, perm)
}

type file struct {
	vfs.File
	fs   *FS
	kind Kind // Sync or SyncDir
}

func (f *file) Read(p []byte) (int, error) {
	if err := f.fs.check(Op{Kind: Read, Path: f.Name(), Len: len(p)}); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(Op{Kind: Read, Path: f.Name(), Len: len(p)}); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) write(p []byte, do func([]byte) (int, error)) (int, error) {
	err := f.fs.check(Op{Kind: Write, Path: f.Name(), Len: len(p)})
	if err == nil {
		return do(p)
	}
	if s, ok := err.(*ShortWrite); ok {
		n, werr := do(p[:min(s.N, len(p))])
		if werr != nil {
			return n, werr
		}
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: s.Err}
	}
	return 0, err
}

func (f *file) Write(p []byte) (int, error) { return f.write(p, f.File.Write) }

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, func(b []byte) (int, error) { return f.File.WriteAt(b, off) })
}

func (f *file) Truncate(size int64) error {
	if err := f.fs.check(Op{Kind: Truncate, Path: f.Name()}); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *file) Sync() error {
	if err := f.fs.check(Op{Kind: f.kind, Path: f.Name()}); err != nil {
		return err
	}
	return f.File.Sync()
}

// Rules build injectors.

// Match is a predicate on operations.
type Match func(Op) bool

// On matches operations of kind whose path contains substr ("" for any).
func On(kind Kind, substr string) Match {
	return func(op Op) bool { return op.Kind == kind && strings.Contains(op.Path, substr) }
}

// Nth fails the matching operations number n to n+count-1 (counting from
// 1) with err; count < 0 fails every one from the nth on.
func Nth(m Match, n, count int, err error) Injector {
	var mu sync.Mutex
	seen := 0
	return func(op Op) error {
		if !m(op) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen >= n && (count < 0 || seen < n+count) {
			return err
		}
		return nil
	}
}

// Always fails every matching operation with err.
func Always(m Match, err error) Injector { return Nth(m, 1, -1, err) }

// DiskFull lets matching writes store limit bytes in all, then fails the
// write that crosses it short with ENOSPC, and every later one.
func DiskFull(m Match, limit int) Injector {
	var mu sync.Mutex
	used := 0
	return func(op Op) error {
		if op.Kind != Write || !m(op) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		room := max(limit-used, 0)
		if op.Len <= room {
			used += op.Len
			return nil
		}
		used = limit
		return &ShortWrite{N: room, Err: syscall.ENOSPC}
	}
}

// Any combines injectors: the first error wins.
func Any(injs ...Injector) Injector {
	return func(op Op) error {
		for _, inj := range injs {
			if err := inj(op); err != nil {
				return err
			}
		}
		return nil
	}
}

// EIO and ENOSPC, for tests.
var (
	EIO    error = syscall.EIO
	ENOSPC error = syscall.ENOSPC
)
