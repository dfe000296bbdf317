// Package datalock keeps two processes from writing one data directory
// at once: a second `kaas serve`, or `kaas users add` under a running
// broker, would each write every file the other writes. The holder keeps
// an exclusive flock(2) on <data>/.lock for its whole life; the kernel
// drops it when the process ends, however it ends, so a crash never
// leaves a stale lock behind. The file holds the holder's pid only to
// name it in the refusal.
//
// Single-broker mode only: a cluster shares its data directory over NFS,
// where locks are unreliable, and etcd membership already refuses a
// second broker with the same id (design.md).
package datalock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// Name is the lock file's name inside the data directory.
const Name = ".lock"

// Lock is a held data-directory lock.
type Lock struct {
	f *os.File
}

// HeldError is the refusal when another process holds the lock.
type HeldError struct {
	Dir string
	Pid int // the holder's pid as it wrote it; 0 if unreadable
}

func (e *HeldError) Error() string {
	holder := "another process"
	if e.Pid > 0 {
		holder = "process " + strconv.Itoa(e.Pid)
	}
	return fmt.Sprintf("data directory %s is in use by %s (it holds %s); stop it first, or give this one another --data",
		e.Dir, holder, filepath.Join(e.Dir, Name))
}

// Acquire creates dir if needed and takes its lock without waiting: a
// *HeldError if another process has it.
func Acquire(dir string) (*Lock, error) {
	if err := durable.MkdirAll(vfs.OS, dir); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the data directory lock: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, Pid: readPid(path)}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	// The pid is a courtesy for the message above, not part of the lock:
	// no fsync, and a crash that loses it costs only the pid in a message.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// flock takes the exclusive lock without blocking, retrying EINTR.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			return err
		}
	}
}

// readPid is the pid the holder wrote, or 0.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Release drops the lock. The file stays: removing it would let a
// process that opened the old file and one that creates a new one both
// "hold" the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
