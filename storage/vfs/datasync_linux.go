package vfs

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

const datasyncName = "fdatasync"

// Datasync makes f's data durable: fdatasync, which skips metadata the
// data does not need (times), retried on EINTR.
func Datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: datasyncName, Path: f.Name(), Err: err}
		}
		return nil
	}
}
