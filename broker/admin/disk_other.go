//go:build !linux

package admin

// fsSpace is unknown off Linux.
func fsSpace(string) (total, free uint64) { return 0, 0 }
