//go:build !linux

package partlog

// inodeGeneration: only Linux is asked for the inode's generation
// (generation_linux.go); elsewhere a file is known by dev and inode.
func inodeGeneration(uintptr) (uint32, bool) { return 0, false }
