package datalock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestAcquire: a held lock refuses a second taker (flock conflicts
// between two opens even within one process), naming the holder's pid;
// released, it can be taken again. The directory is created if missing.
func TestAcquire(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.Pid != os.Getpid() {
		t.Fatalf("second Acquire: %v, want a HeldError naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}
