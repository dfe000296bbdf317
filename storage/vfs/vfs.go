// Package vfs is the filesystem seam every store writes through: the
// partition log, producer snapshots, the slot logs, the fence file, the pid
// allocator and the metadata files. Production uses OS (the real
// filesystem, with fdatasync for file syncs); tests swap in errorfs (inject
// EIO, ENOSPC, short writes into any operation) or memfs (an in-memory
// filesystem that can simulate a power loss, dropping every byte and
// directory entry no successful fsync covered). Models: pebble's vfs,
// vfs/errorfs and MemFS.CrashClone; kfake's persist_fs.go.
package vfs

import (
	"io"
	"io/fs"
	"os"

	"kaas/storage/diskcheck"
)

// File is an open file (or, from FS.OpenDir, a directory whose Sync makes
// its entries durable).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Seeker
	io.Closer
	// Name is the path the file was opened with.
	Name() string
	Stat() (fs.FileInfo, error)
	Truncate(size int64) error
	// Sync makes the file's data (and its size) durable: fdatasync. On a
	// directory it makes the entries created, renamed or removed in it
	// durable.
	Sync() error
}

// FS is the set of filesystem operations the stores use.
type FS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// OpenDir opens a directory for Sync.
	OpenDir(name string) (File, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	Stat(name string) (fs.FileInfo, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	RemoveAll(name string) error
	// Mkdir creates one directory; its entry in the parent is durable
	// once the parent is synced.
	Mkdir(name string, perm fs.FileMode) error
}

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

// osFile is an *os.File whose Sync is fdatasync: the stores need the data
// and the file size durable, not the modification time, and fdatasync
// skips the inode write fsync would add to every group commit.
type osFile struct{ *os.File }

// The os-backed methods tell diskcheck first: a request handler on a
// network event loop must never reach one.

func (f osFile) Read(p []byte) (int, error) {
	diskcheck.Blocking("read", f.Name())
	return f.File.Read(p)
}

func (f osFile) ReadAt(p []byte, off int64) (int, error) {
	diskcheck.Blocking("read", f.Name())
	return f.File.ReadAt(p, off)
}

func (f osFile) Write(p []byte) (int, error) {
	diskcheck.Blocking("write", f.Name())
	return f.File.Write(p)
}

func (f osFile) WriteAt(p []byte, off int64) (int, error) {
	diskcheck.Blocking("write", f.Name())
	return f.File.WriteAt(p, off)
}

func (f osFile) Truncate(size int64) error {
	diskcheck.Blocking("truncate", f.Name())
	return f.File.Truncate(size)
}

func (f osFile) Sync() error {
	diskcheck.Blocking(datasyncName, f.Name())
	return Datasync(f.File)
}

// osDir is a directory opened for fsync.
type osDir struct{ *os.File }

func (d osDir) Sync() error {
	diskcheck.Blocking("fsync directory", d.Name())
	return d.File.Sync()
}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	diskcheck.Blocking("open", name)
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenDir(name string) (File, error) {
	diskcheck.Blocking("open directory", name)
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osDir{f}, nil
}

func (osFS) ReadDir(name string) ([]fs.DirEntry, error) {
	diskcheck.Blocking("read directory", name)
	return os.ReadDir(name)
}

func (osFS) Stat(name string) (fs.FileInfo, error) {
	diskcheck.Blocking("stat", name)
	return os.Stat(name)
}

func (osFS) Rename(oldpath, newpath string) error {
	diskcheck.Blocking("rename", oldpath)
	return os.Rename(oldpath, newpath)
}

func (osFS) Remove(name string) error {
	diskcheck.Blocking("remove", name)
	return os.Remove(name)
}

func (osFS) RemoveAll(name string) error {
	diskcheck.Blocking("remove", name)
	return os.RemoveAll(name)
}

func (osFS) Mkdir(name string, perm fs.FileMode) error {
	diskcheck.Blocking("mkdir", name)
	return os.Mkdir(name, perm)
}

// Or returns fsys, or OS when fsys is nil (the zero value of every
// store's configuration).
func Or(fsys FS) FS {
	if fsys == nil {
		return OS
	}
	return fsys
}

// Open opens name read-only.
func Open(fsys FS, name string) (File, error) { return fsys.OpenFile(name, os.O_RDONLY, 0) }

// ReadFile reads a whole file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := Open(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	size := 0
	if err == nil && st.Size() > 0 {
		size = int(st.Size())
	}
	buf := make([]byte, 0, size+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// Exists reports whether name exists (errors other than "not there" count
// as existing, so callers go on to open it and see the error).
func Exists(fsys FS, name string) bool {
	_, err := fsys.Stat(name)
	return err == nil || !os.IsNotExist(err)
}
