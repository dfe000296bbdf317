package partlog

import (
	"syscall"
	"time"
)

// processCPU is this process's user and system CPU so far (the
// benchmarks report CPU per operation with it).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
