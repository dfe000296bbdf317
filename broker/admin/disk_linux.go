package admin

import "syscall"

// fsSpace is the total and available bytes of the filesystem holding dir.
func fsSpace(dir string) (total, free uint64) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, 0
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize)
}
