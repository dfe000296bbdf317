package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"kaas/model/proc"
)

// Recorder collects one side's measurements while a scenario runs: ops,
// records and bytes (atomics) and op latencies (Hist), sampled into a
// time series every interval for the report's charts.
type Recorder struct {
	records atomic.Int64
	bytes   atomic.Int64
	ops     atomic.Int64
	lat     Hist

	start time.Time
	// A sliced recorder (Env.Companion, and the side's own recorder
	// once it has one) counts time and CPU only while it is active:
	// paused is set between its slices, activeAt and activeCPU are when
	// and at what CPU time its current slice began, elapsed and cpuUsed
	// what its finished slices added up to.
	slice     sync.Mutex
	paused    bool
	activeAt  time.Time
	activeCPU time.Duration
	elapsed   time.Duration
	cpuUsed   time.Duration
	// cpu reads the CPU time the side has used (default: this process's;
	// the cluster scenarios add their broker processes').
	cpu      func() time.Duration
	interval time.Duration
	mu       sync.Mutex
	series   []Point
	stop     chan struct{}
	done     chan struct{}
}

// Point is one interval of the time series.
type Point struct {
	At         time.Duration // since start, end of the interval
	RecordsSec float64
	MBSec      float64
	OpsSec     float64
	P50, P99   time.Duration // of the ops completed in the interval
}

func newRecorder(interval time.Duration) *Recorder {
	return &Recorder{interval: interval, cpu: proc.CPU, stop: make(chan struct{}), done: make(chan struct{})}
}

// begin starts the clock and the sampler.
func (r *Recorder) begin() {
	r.start = time.Now()
	r.activeAt, r.activeCPU = r.start, r.cpu()
	go r.sample()
}

// pause stops counting time and CPU until resume (the end of a slice).
func (r *Recorder) pause() {
	r.slice.Lock()
	defer r.slice.Unlock()
	if !r.paused {
		r.elapsed += time.Since(r.activeAt)
		r.cpuUsed += r.cpu() - r.activeCPU
		r.paused = true
	}
}

// resume starts a slice.
func (r *Recorder) resume() {
	r.slice.Lock()
	defer r.slice.Unlock()
	if r.paused {
		r.activeAt, r.activeCPU = time.Now(), r.cpu()
		r.paused = false
	}
}

// active is the time and CPU counted so far: since begin, less the
// pauses.
func (r *Recorder) active() (time.Duration, time.Duration) {
	r.slice.Lock()
	defer r.slice.Unlock()
	if r.paused {
		return r.elapsed, r.cpuUsed
	}
	return r.elapsed + time.Since(r.activeAt), r.cpuUsed + r.cpu() - r.activeCPU
}

// Op records one completed operation carrying records and bytes, which
// took lat.
func (r *Recorder) Op(records, bytes int64, lat time.Duration) {
	r.ops.Add(1)
	r.records.Add(records)
	r.bytes.Add(bytes)
	r.lat.Record(lat)
}

// Data counts records and bytes without an op latency (consumers).
func (r *Recorder) Data(records, bytes int64) {
	r.records.Add(records)
	r.bytes.Add(bytes)
}

func (r *Recorder) sample() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	// Points are placed on the recorder's active time: a sliced
	// recorder's chart runs its slices together.
	var prevAt time.Duration
	var prevRec, prevBytes, prevOps int64
	prevHist := r.lat.Snapshot()
	take := func() {
		at, _ := r.active()
		rec, by, ops := r.records.Load(), r.bytes.Load(), r.ops.Load()
		h := r.lat.Snapshot()
		dt := (at - prevAt).Seconds()
		if dt <= 0 {
			return // paused all along
		}
		iv := h.Minus(prevHist)
		r.mu.Lock()
		r.series = append(r.series, Point{
			At:         at,
			RecordsSec: float64(rec-prevRec) / dt,
			MBSec:      float64(by-prevBytes) / dt / 1e6,
			OpsSec:     float64(ops-prevOps) / dt,
			P50:        iv.Quantile(0.5),
			P99:        iv.Quantile(0.99),
		})
		r.mu.Unlock()
		prevAt, prevRec, prevBytes, prevOps, prevHist = at, rec, by, ops, h
	}
	for {
		select {
		case <-t.C:
			take()
		case <-r.stop:
			take()
			return
		}
	}
}

// end stops the sampler and returns the side's result.
func (r *Recorder) end(side string) *Result {
	elapsed, cpu := r.active()
	close(r.stop)
	<-r.done
	h := r.lat.Snapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Result{
		Side: side, Elapsed: elapsed, CPU: cpu,
		Records: r.records.Load(), Bytes: r.bytes.Load(), Ops: r.ops.Load(),
		P50: h.Quantile(0.5), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
		Series: append([]Point(nil), r.series...),
	}
}

// live reports the running totals for the progress bar.
func (r *Recorder) live() (records, ops int64, elapsed time.Duration) {
	return r.records.Load(), r.ops.Load(), time.Since(r.start)
}

// Result is one side of one scenario.
type Result struct {
	Side    string
	Elapsed time.Duration
	// CPU is the time this process spent on a CPU (user + system, every
	// goroutine: client and in-process broker) while the side was
	// measured. Per op it is the figure a busy machine disturbs least: a
	// side that waits for cores it shares with others runs slower but
	// burns about the same CPU per op.
	CPU time.Duration
	// Load is the machine's one-minute load average when the side began.
	Load    float64
	Records int64
	Bytes   int64
	Ops     int64
	// Latency of one op (what an op is depends on the scenario: a record's
	// produce-to-ack, a transaction, a commit, ...).
	P50, P99, P999 time.Duration
	Series         []Point
	// Notes are extra figures (e.g. the broker's fence fan-out histogram).
	Notes []string
	// Summary is the run's figures in one line (Env.RunSummary).
	Summary string
	// Value replaces the rate for scenarios that measure a quantity (RSS).
	Value     float64
	ValueUnit string
	Err       error
}

// RecordsSec is the mean record rate.
func (r *Result) RecordsSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// OpsSec is the mean op rate.
func (r *Result) OpsSec() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

// MBSec is the mean data rate in MB/s (10^6 bytes).
func (r *Result) MBSec() float64 { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }

// CPUPerOp is the process CPU time per record (per op when the scenario
// moves no records); 0 when unknown.
func (r *Result) CPUPerOp() time.Duration {
	n := r.Records
	if n == 0 {
		n = r.Ops
	}
	if n == 0 || r.CPU <= 0 {
		return 0
	}
	return r.CPU / time.Duration(n)
}
