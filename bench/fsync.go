package bench

import (
	"os"
	"sort"
	"time"
)

// fsyncSample is how many fsyncs machineFsync times.
const fsyncSample = 100

// machineFsync times fsyncSample appends of 200 bytes to a fresh file in
// dir (the file system the in-process kaas writes to), each followed by
// an fdatasync: what one durable acknowledgement costs on this machine at
// this moment, the yardstick for transaction latencies.
func machineFsync(dir string) (p50, p99 time.Duration, err error) {
	f, err := os.CreateTemp(dir, "kaas-bench-fsync-")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 200)
	took := make([]time.Duration, 0, fsyncSample)
	for range fsyncSample {
		if _, err := f.Write(buf); err != nil {
			return 0, 0, err
		}
		start := time.Now()
		if err := datasync(f); err != nil {
			return 0, 0, err
		}
		took = append(took, time.Since(start))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	return took[len(took)/2], took[len(took)*99/100], nil
}

// fsyncNote measures the machine's fsync right after a side's run and
// puts the side's op p50 against it.
func fsyncNote(e *Env) {
	p50, p99, err := machineFsync(e.Opts.TempDir)
	if err != nil {
		e.Note("machine fsync not measured: %v", err)
		return
	}
	line := "machine fsync (200-byte append + fdatasync, %d times after the run): p50 %s, p99 %s"
	args := []any{fsyncSample, durFine(p50), durFine(p99)}
	if s := e.Rec.lat.Snapshot(); s.Count() > 0 && p50 > 0 {
		line += "; %s p50 = %.1f × fsync p50"
		args = append(args, e.name, float64(s.Quantile(0.5))/float64(p50))
	}
	e.Note(line, args...)
}
