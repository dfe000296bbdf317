package bench

import (
	"os"
	"sort"
	"time"

	"kaas/model/proc"
	"kaas/storage/vfs"
)

// fsyncSample is how many fsyncs machineFsync times back to back.
const fsyncSample = 100

// pacedFsyncWindow bounds how long a paced probe runs.
const pacedFsyncWindow = 2 * time.Second

// machineFsync times n appends of 200 bytes to a fresh file in dir (the
// file system the in-process kaas writes to), each followed by an
// fdatasync, one every pace (0: back to back): what one durable
// acknowledgement costs on this machine at this moment, the yardstick for
// transaction and fence latencies.
//
// Why a pace: an fsync after the disk has idled is slower than one of a
// stream (this VM: p50 0.44 ms and p99 8 ms one every 50 ms, against
// 0.20 and 0.50 ms back to back), so a scenario that waits between
// operations is put against fsyncs made the same way.
func machineFsync(dir string, n int, pace time.Duration) (p50, p99 time.Duration, err error) {
	f, err := os.CreateTemp(dir, "kaas-bench-fsync-")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 200)
	took := make([]time.Duration, 0, n)
	for i := range n {
		if i > 0 && pace > 0 {
			time.Sleep(pace)
		}
		if _, err := f.Write(buf); err != nil {
			return 0, 0, err
		}
		start := time.Now()
		if err := vfs.Datasync(f); err != nil {
			return 0, 0, err
		}
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	return took[len(took)/2], took[len(took)*99/100], nil
}

// fsyncNote measures the machine's fsync right after a side's run, one
// every pace (0: back to back, as the operations of a closed loop follow
// each other), and puts the side's op p50 against it. It returns the
// fsync p50 (0: not measured).
func fsyncNote(e *Env, pace time.Duration) time.Duration {
	n, how := fsyncSample, "back to back"
	if pace > 0 {
		n, how = max(10, min(fsyncSample, int(pacedFsyncWindow/pace))), "one every "+pace.String()
	}
	p50, p99, err := machineFsync(e.Opts.TempDir, n, pace)
	if err != nil {
		e.Note("machine fsync not measured: %v", err)
		return 0
	}
	line := "machine fsync (200-byte append + fdatasync, %d times %s after the run): p50 %s, p99 %s"
	args := []any{n, how, durFine(p50), durFine(p99)}
	if s := e.Rec.lat.Snapshot(); s.Count() > 0 && p50 > 0 {
		line += "; %s p50 = %.1f × fsync p50"
		args = append(args, e.name, float64(s.Quantile(0.5))/float64(p50))
	}
	e.Note(line, args...)
	return p50
}

// fsyncCPU is the process CPU of one 200-byte write and fdatasync into
// room already written (a file zero-filled and fsynced ahead, as kaas's
// partition and slot logs preallocate theirs), n of them back to back:
// what each durable write of kaas's costs the process, whoever makes it
// (the scenario's clients and brokers are idle by then). 0: not measured.
func fsyncCPU(dir string, n int) time.Duration {
	f, err := os.CreateTemp(dir, "kaas-bench-fsync-cpu-")
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 200)
	if _, err := f.Write(make([]byte, n*len(buf))); err != nil || vfs.Datasync(f) != nil {
		return 0
	}
	start := proc.CPU()
	for i := range n {
		if _, err := f.WriteAt(buf, int64(i*len(buf))); err != nil {
			return 0
		}
		if err := vfs.Datasync(f); err != nil {
			return 0
		}
	}
	return (proc.CPU() - start) / time.Duration(n)
}
