package durable

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"kaas/storage/vfs"
)

// Env is what every store is opened with: the filesystem, where the data
// directory is (quarantined files go under it), the corruption policy and
// where to report failures.
type Env struct {
	FS      vfs.FS
	DataDir string
	// SkipCorrupt (--skip-corrupt) moves a corrupt file aside and goes on
	// instead of refusing to start.
	SkipCorrupt bool
	Logger      *slog.Logger
	Observer    Observer
}

// Observer is told about disk failures and quarantined files (metrics).
// Methods must not block.
type Observer interface {
	// Failed: a write or fsync failed and the store (a partition, a slot
	// log, the fence file, ...) went offline.
	Failed(store string)
	// Quarantined: a corrupt file was moved aside at start-up.
	Quarantined(store string)
}

type nopObserver struct{}

func (nopObserver) Failed(string)      {}
func (nopObserver) Quarantined(string) {}

// Or fills in the defaults of a zero Env: the real filesystem, the
// default logger, no observer.
func (e Env) Or() Env {
	e.FS = vfs.Or(e.FS)
	if e.Logger == nil {
		e.Logger = slog.Default()
	}
	if e.Observer == nil {
		e.Observer = nopObserver{}
	}
	return e
}

// Failed logs and counts a write or fsync failure that takes a store
// offline.
func (e Env) Failed(store string, err error, attrs ...any) {
	e.Logger.Error("disk write failed; "+store+" is offline until a restart recovers it from disk",
		append([]any{"store", store, "err", err}, attrs...)...)
	e.Observer.Failed(store)
}

// CorruptError is damage found at start-up that recovery must not cut
// away: the broker refuses to start, naming the file and the byte offset.
type CorruptError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s is corrupt at byte %d: %s; nothing was changed. Restore the file, or start with --skip-corrupt to move it aside to %s and go on without what it held",
		e.Path, e.Offset, e.Reason, QuarantineDir)
}

// QuarantineDir is where --skip-corrupt moves corrupt files, under the data
// directory.
const QuarantineDir = "quarantine"

// ErrCorrupt matches every *CorruptError with errors.Is.
var ErrCorrupt = errors.New("corrupt data")

// Is makes errors.Is(err, ErrCorrupt) true for a CorruptError.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Corrupt is the corruption policy, shared by every store: it returns the
// *CorruptError to fail the open with, or, with SkipCorrupt, moves the file
// to <data>/quarantine/<time>/<its path under data>, logs and counts that,
// and returns nil so the store goes on without it (each store says in its
// own doc what it keeps: see docs/durability.md).
func (e Env) Corrupt(store, path string, offset int64, reason string) error {
	cerr := &CorruptError{Path: path, Offset: offset, Reason: reason}
	if !e.SkipCorrupt {
		e.Logger.Error("refusing to start: corrupt data", "store", store, "file", path, "offset", offset, "reason", reason)
		return cerr
	}
	moved, err := e.quarantine(path)
	if err != nil {
		return fmt.Errorf("%w (and moving it aside failed: %v)", cerr, err)
	}
	e.Logger.Warn("moved a corrupt file aside (--skip-corrupt)", "store", store, "file", path, "offset", offset,
		"reason", reason, "moved_to", moved)
	e.Observer.Quarantined(store)
	return nil
}

func (e Env) quarantine(path string) (string, error) {
	rel, err := filepath.Rel(e.DataDir, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = filepath.Base(path)
	}
	dest := filepath.Join(e.DataDir, QuarantineDir, time.Now().UTC().Format("20060102T150405.000000000Z"), rel)
	if err := MkdirAll(e.FS, filepath.Dir(dest)); err != nil {
		return "", err
	}
	if err := e.FS.Rename(path, dest); err != nil {
		return "", err
	}
	if err := SyncDir(e.FS, filepath.Dir(dest)); err != nil {
		return "", err
	}
	return dest, SyncDir(e.FS, filepath.Dir(path))
}
