package partlog

import "golang.org/x/sys/unix"

// fsIocGetversion is FS_IOC_GETVERSION (_IOR('v', 1, long)), which
// x/sys/unix does not define: the inode's generation number.
const fsIocGetversion = 0x80087601

// inodeGeneration is the generation of the open file fd's inode, where
// its file system keeps one (ext4, xfs, btrfs; not tmpfs or NFS).
func inodeGeneration(fd uintptr) (uint32, bool) {
	g, err := unix.IoctlGetUint32(int(fd), fsIocGetversion)
	return g, err == nil
}
