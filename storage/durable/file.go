// Package durable holds what every store shares about the disk: the one
// way kaas writes a metadata file (temp file, fsync, rename, directory
// fsync, so a crash leaves the old or the new content and never a torn
// file), directories whose entries are fsynced when created, and the
// corruption policy (Env.Corrupt): refuse to start naming the file and the
// byte offset, or with --skip-corrupt move the file aside.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"kaas/storage/vfs"
)

// TempPrefix starts every temporary file name. Temp names are short and
// independent of the target's name, so a file whose own name is near the
// 255-byte limit (a 249-character topic's metadata) can still be
// replaced atomically.
const TempPrefix = ".tmp-"

// IsTemp reports whether a directory entry is a leftover temporary file.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// WriteFile replaces path with data atomically and durably.
func WriteFile(fsys vfs.FS, path string, data []byte) error {
	return WriteFileMode(fsys, path, data, 0o644)
}

// WriteFileMode is WriteFile with the file's permissions (0o600 for files
// holding credentials). The temporary file is always a new one (O_EXCL),
// so it is created with mode, never inherits an old one's.
func WriteFileMode(fsys vfs.FS, path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, fmt.Sprintf("%s%08x", TempPrefix, rand.Uint32()))
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("creating a temporary file for %s: %w", filepath.Base(path), err)
	}
	fail := func(what string, err error) error {
		f.Close()
		_ = fsys.Remove(tmp)
		return fmt.Errorf("%s %s: %w", what, filepath.Base(path), err)
	}
	if _, err := f.Write(data); err != nil {
		return fail("writing", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync of the new", err)
	}
	if err := f.Close(); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("closing the new %s: %w", filepath.Base(path), err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("renaming the new %s into place: %w", filepath.Base(path), err)
	}
	return SyncDir(fsys, dir)
}

// SyncDir fsyncs a directory so entries created, renamed or removed in it
// survive a crash.
func SyncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync of directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and any missing parents, fsyncing each parent whose
// entry it created, so the new directories survive a crash (a directory
// that exists already is assumed durable).
func MkdirAll(fsys vfs.FS, dir string) error {
	dir = filepath.Clean(dir)
	st, err := fsys.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating directory %s: %w", dir, err)
	}
	return SyncDir(fsys, parent)
}

// RemoveTemps deletes leftover temporary files in dir (a crash between
// creating one and renaming it).
func RemoveTemps(fsys vfs.FS, dir string) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if IsTemp(e.Name()) {
			_ = fsys.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
