package partlog

import "golang.org/x/sys/unix"

// mapMemory is the memory of an offset map's tables, mapped from the
// system apart from the Go heap: huge pages, where the kernel has them
// (MADV_HUGEPAGE: transparent huge pages are "madvise" on most
// distributions, and Go does not ask for them), so that a probe at
// random into tens of MiB of slots misses the TLB far less often than
// with 4 KiB pages (a page walk beside every slot's cache miss); pages
// that arrive zeroed (no clearing by the allocator); and given back
// whole when the pass ends (munmap), not at the collector's pace. It
// holds no Go pointers, so the collector need not see it.
func mapMemory(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: 4 KiB pages still work
	return b, nil
}

// freeMapMemory gives mapMemory's memory back.
func freeMapMemory(b []byte) { _ = unix.Munmap(b) }
