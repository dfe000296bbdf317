package bench

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"time"
)

// schedLatencies is the Go runtime's histogram of how long goroutines
// waited to run once runnable (both sides share this process, so each
// side's window is the difference of two readings).
const schedLatencies = "/sched/latencies:seconds"

func readSched() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedNote says how long goroutines waited for a P in the measured
// window (since e.Begin, to now): every actor hand-off, answer and
// event-loop wake-up pays it, and a broker whose Ps sit in fsyncs pays
// more of it than one that never blocks (see cmd/kaas/procs.go).
func schedNote(e *Env) {
	before, after := e.sched, readSched()
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return
	}
	counts := make([]uint64, len(after.Counts))
	var total uint64
	for i := range counts {
		counts[i] = after.Counts[i] - before.Counts[i]
		total += counts[i]
	}
	if total == 0 {
		return
	}
	var parts []string
	for _, q := range []float64{0.5, 0.9, 0.99} {
		var acc uint64
		for i, c := range counts {
			acc += c
			if float64(acc) >= q*float64(total) {
				// The bucket's upper bound: the quantile is at most that.
				parts = append(parts, fmt.Sprintf("p%g ≤ %s", q*100, dur(time.Duration(after.Buckets[i+1]*1e9))))
				break
			}
		}
	}
	e.Note("Go scheduler, runnable to running (whole process, GOMAXPROCS %d): %s", runtime.GOMAXPROCS(0), strings.Join(parts, ", "))
}
