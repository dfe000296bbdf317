// Package proc reads this process's own resource use. It sits with model,
// the layer every other may import, because both the benchmark harness
// (bench) and storage's Go benchmarks report CPU per operation with it,
// and storage may import nothing above model.
package proc

import (
	"syscall"
	"time"
)

// CPU is the user + system CPU time this process has used so far (0
// where getrusage is unavailable).
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ContextSwitches is how many times this process's threads gave up a core
// (voluntary: they blocked, in a futex, a read, an fsync...) or had it
// taken (involuntary) so far; zeros where getrusage is unavailable. Per
// operation it counts the hand-offs between threads an operation costs.
func ContextSwitches() (voluntary, involuntary int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return ru.Nvcsw, ru.Nivcsw
}
