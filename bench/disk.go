package bench

import (
	crand "crypto/rand"
	"fmt"
	"io"
	"os"
	"time"
	"unsafe"

	"kaas/storage/vfs"
)

// The disk yardstick of compact-clean. Written through the page cache, a
// few hundred MiB and an fsync measure the cache as much as the disk: on
// the development VM, 256 MiB in 1 MiB writes + fsync gave 169 to 2,200
// MB/s between runs, depending on how much of it writeback had flushed
// before the fsync. O_DIRECT takes the page cache out: each write goes to
// the device before it returns, so the figure is the device's (the
// virtual disk's, as this guest sees it: what a host does below is the
// disk). Measured both ways on that VM in one minute: buffered 274–1,200
// MB/s, O_DIRECT writes 925–1,100 MB/s, O_DIRECT reads of the file just
// written 720–930 MB/s.

// directBlock is one O_DIRECT transfer: large, so the figure is the
// device's streaming rate rather than its per-request cost, and a
// multiple of every logical block size (512 B, 4 KiB) with its buffer
// aligned to 4 KiB, as O_DIRECT requires.
const directBlock = 4 << 20

// directAlign is the alignment of directBlock's buffer and file offsets.
const directAlign = 4096

// diskBandwidth is one measurement of the disk's sequential bandwidth.
type diskBandwidth struct {
	bytes int64
	// write: size bytes written with O_DIRECT in directBlock writes, then
	// an fdatasync (the device's write cache flushed); read: the same file
	// read back with O_DIRECT (from the device, not the page cache).
	writeMBs, readMBs float64
	// bufferedMBs is the old yardstick, kept for comparison: the same
	// bytes written through the page cache in 1 MiB writes and an fsync.
	bufferedMBs float64
}

// yardstick is the figure the cleaner is held against: the read. The
// cleaner's MB/s counts dirty log consumed, which is log read; reading
// it off the device at its bandwidth is what a cleaner bound by the disk
// would do at best. (The writes measured faster than the reads on the
// development VM, 1,300–1,460 against 810–860 MB/s in one run: a write
// cache below the guest acknowledges them, the page cache's problem one
// level down.) The notes give the write figure and the ratio to it too.
func (d diskBandwidth) yardstick() float64 { return d.readMBs }

func (d diskBandwidth) String() string {
	return fmt.Sprintf("O_DIRECT write %.0f MB/s (%d MiB in %d MiB aligned writes + fdatasync), O_DIRECT read of it %.0f MB/s; "+
		"through the page cache (1 MiB writes + fsync, the old yardstick) %.0f MB/s",
		d.writeMBs, d.bytes>>20, directBlock>>20, d.readMBs, d.bufferedMBs)
}

// measureDiskBandwidth measures the disk under dir with size bytes
// (rounded up to directBlock) of incompressible data: a virtual disk may
// compress or skip zeros.
func measureDiskBandwidth(dir string, size int64) (diskBandwidth, error) {
	size = (size + directBlock - 1) / directBlock * directBlock
	d := diskBandwidth{bytes: size}
	buf := alignedBuf(directBlock, directAlign)
	_, _ = crand.Read(buf)
	f, err := os.CreateTemp(dir, "kaas-bench-disk-")
	if err != nil {
		return d, err
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)

	if d.writeMBs, err = directWrite(name, buf, size); err != nil {
		return d, err
	}
	if d.readMBs, err = directRead(name, buf, size); err != nil {
		return d, err
	}
	if d.bufferedMBs, err = bufferedWrite(name, buf[:1<<20], size); err != nil {
		return d, err
	}
	return d, nil
}

// alignedBuf is n bytes whose first byte is at a multiple of align.
func alignedBuf(n, align int) []byte {
	b := make([]byte, n+align)
	off := (align - int(uintptr(unsafe.Pointer(&b[0])))%align) % align
	return b[off : off+n : off+n]
}

func directWrite(name string, buf []byte, size int64) (float64, error) {
	f, err := openDirect(name, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return timedWrite(f, buf, size, vfs.Datasync)
}

func directRead(name string, buf []byte, size int64) (float64, error) {
	f, err := openDirect(name, os.O_RDONLY)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	start := time.Now()
	var n int64
	for n < size {
		m, err := f.Read(buf)
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if n != size {
		return 0, fmt.Errorf("read %d of %d bytes back", n, size)
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}

func bufferedWrite(name string, buf []byte, size int64) (float64, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return timedWrite(f, buf, size, (*os.File).Sync)
}

// timedWrite writes buf to f until size bytes, then syncs it, and
// returns the rate in MB/s.
func timedWrite(f *os.File, buf []byte, size int64, sync func(*os.File) error) (float64, error) {
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
	}
	if err := sync(f); err != nil {
		return 0, err
	}
	return float64(size) / 1e6 / time.Since(start).Seconds(), nil
}
