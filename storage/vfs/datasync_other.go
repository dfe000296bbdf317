//go:build !linux

package vfs

import "os"

const datasyncName = "fsync"

// Datasync makes f's data durable where there is no fdatasync: Go's
// File.Sync (on macOS it asks for F_FULLFSYNC, a flush of the drive's
// cache, which plain fsync there does not).
func Datasync(f *os.File) error { return f.Sync() }
