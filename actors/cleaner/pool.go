// Package cleaner runs the log cleaner's passes (Apache's LogCleaner and
// LogCleanerManager, broker-wide): a few goroutines (log.cleaner.threads)
// that take the dirtiest waiting partition first, each with its share of
// the dedupe buffer (log.cleaner.dedupe.buffer.size) and one throughput
// limit for all (log.cleaner.io.max.bytes.per.second), and a timer that
// asks every compacted partition to check whether it needs a pass every
// log.cleaner.backoff.ms. All four change at run time (KIP-226).
//
// The partition actor plans a pass and installs its result; the pool
// only runs it, off the actor and off the network event loops, so
// appends never wait for one.
package cleaner

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"kaas/storage/partlog"
)

// Config is the cleaner's broker configs.
type Config struct {
	Enabled       bool          // log.cleaner.enable
	Threads       int           // log.cleaner.threads
	DedupeBytes   int64         // log.cleaner.dedupe.buffer.size, across threads
	IOBytesPerSec float64       // log.cleaner.io.max.bytes.per.second
	Backoff       time.Duration // log.cleaner.backoff.ms
}

// DefaultConfig is Apache's.
func DefaultConfig() Config {
	return Config{Enabled: true, Threads: 1, DedupeBytes: 128 << 20, IOBytesPerSec: math.MaxFloat64, Backoff: 15 * time.Second}
}

// Pool is the broker's cleaner.
type Pool struct {
	log *slog.Logger

	mu      sync.Mutex
	cfg     Config
	queue   []*job
	running int
	parts   map[string]func() // compacted partitions: ask for a check
	timer   *time.Timer
	closed  bool
	tokens  float64 // the throttle's bucket
	refill  time.Time
	// changed is closed (and replaced) when the configs change or the
	// pool closes: it wakes passes sleeping in the throttle, so that a
	// raised or lifted limit applies at once, not after a sleep the old
	// limit computed (under a limit of a few bytes a second, that sleep
	// is days long).
	changed chan struct{}
	now     func() time.Time // the throttle's clock (tests replace it)
	// sleep sleeps up to d, less if wake is closed first, and returns
	// how long it slept.
	sleep func(d time.Duration, wake <-chan struct{}) time.Duration

	stats Stats
	// last is the latest passes, one for each of log.cleaner.threads:
	// Apache's gauges that look at every cleaner thread's last run look
	// at these (Recent).
	last []lastPass
}

// lastPass is what a finished pass leaves for those gauges.
type lastPass struct {
	util           float64
	read, written  int64
	elapsed, delay time.Duration
}

// Recent is Apache's gauges over each cleaner thread's last run, taken
// here over the last log.cleaner.threads passes (kaas's workers come and
// go with the queue, so a pass, not a thread, is what is remembered).
type Recent struct {
	MaxBufferUtilization float64       // max-buffer-utilization-percent, as a fraction
	Recopy               float64       // cleaner-recopy-percent, as a fraction: bytes written over bytes read
	MaxCleanTime         time.Duration // max-clean-time-secs
	MaxCompactionDelay   time.Duration // max-compaction-delay-secs: how far past max.compaction.lag.ms a pass started
}

// Recent returns the gauges of the last passes (zero before the first).
func (p *Pool) Recent() Recent {
	p.mu.Lock()
	defer p.mu.Unlock()
	var r Recent
	var read, written int64
	for _, l := range p.last {
		r.MaxBufferUtilization = max(r.MaxBufferUtilization, l.util)
		r.MaxCleanTime = max(r.MaxCleanTime, l.elapsed)
		r.MaxCompactionDelay = max(r.MaxCompactionDelay, l.delay)
		read += l.read
		written += l.written
	}
	if read > 0 {
		r.Recopy = float64(written) / float64(read)
	}
	return r
}

// Stats are the cleaner's counters (kaas_log_cleaner_*).
type Stats struct {
	Passes, Failures        atomic.Int64
	BytesRead, BytesWritten atomic.Int64
	RecordsRemoved          atomic.Int64
	LastPassUnixMs          atomic.Int64
	Uncleanable             atomic.Int64 // partitions whose cleaner is offline
	maxDirtyRatio           atomic.Uint64
	Running, Queued         atomic.Int64
	// IOBytes is every byte a pass read or wrote, as the throttle saw
	// it; ThrottleNanos the sleep it imposed for them; PassNanos the time
	// passes ran, sleep included (IOBytes/PassNanos is their rate).
	IOBytes, ThrottleNanos, PassNanos atomic.Int64
}

// MaxDirtyRatio is the largest dirty ratio a pass was submitted with.
func (s *Stats) MaxDirtyRatio() float64 { return math.Float64frombits(s.maxDirtyRatio.Load()) }

type job struct {
	ratio float64
	run   func(partlog.CleanOptions)
}

// New starts a pool.
func New(cfg Config, log *slog.Logger) *Pool {
	p := &Pool{log: log, cfg: cfg, parts: map[string]func(){}, refill: time.Now(), changed: make(chan struct{}), now: time.Now, sleep: sleepOrWake}
	p.mu.Lock()
	p.arm()
	p.mu.Unlock()
	return p
}

// Stats returns the pool's counters.
func (p *Pool) Stats() *Stats { return &p.stats }

// SetConfig applies changed cleaner configs (a dynamic broker config
// change): new passes use them, running ones finish with theirs.
func (p *Pool) SetConfig(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	backoffChanged := cfg.Backoff != p.cfg.Backoff
	if cfg.IOBytesPerSec != p.cfg.IOBytesPerSec {
		// A new limit starts from an empty bucket: neither the debt nor
		// the credit of the old one carries over.
		p.tokens, p.refill = 0, p.now()
	}
	p.cfg = cfg
	p.wake()
	if backoffChanged && p.timer != nil {
		p.timer.Reset(p.backoff())
	}
	p.startWorkers()
}

// wake wakes the passes sleeping in the throttle (under mu).
func (p *Pool) wake() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func sleepOrWake(d time.Duration, wake <-chan struct{}) time.Duration {
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	}
	return time.Since(start)
}

// Config is the configuration in force.
func (p *Pool) Config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

func (p *Pool) backoff() time.Duration { return max(p.cfg.Backoff, 10*time.Millisecond) }

func (p *Pool) arm() {
	if p.closed {
		return
	}
	p.timer = time.AfterFunc(p.backoff(), p.tick)
}

// tick asks every compacted partition to check.
func (p *Pool) tick() {
	p.mu.Lock()
	pokes := make([]func(), 0, len(p.parts))
	if p.cfg.Enabled {
		for _, f := range p.parts {
			pokes = append(pokes, f)
		}
	}
	p.arm()
	p.mu.Unlock()
	for _, f := range pokes {
		f()
	}
}

// Register makes a compacted partition checked every backoff; poke must
// not block (it sends the actor a message).
func (p *Pool) Register(name string, poke func()) {
	p.mu.Lock()
	p.parts[name] = poke
	p.mu.Unlock()
}

// Unregister stops the checks of a partition.
func (p *Pool) Unregister(name string) {
	p.mu.Lock()
	delete(p.parts, name)
	p.mu.Unlock()
}

// Submit queues a pass; the dirtiest waiting pass runs first. run gets
// the pass's resources and must deliver its result itself.
func (p *Pool) Submit(ratio float64, run func(partlog.CleanOptions)) {
	for {
		old := p.stats.maxDirtyRatio.Load()
		if math.Float64frombits(old) >= ratio || p.stats.maxDirtyRatio.CompareAndSwap(old, math.Float64bits(ratio)) {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue = append(p.queue, &job{ratio: ratio, run: run})
	p.stats.Queued.Store(int64(len(p.queue)))
	p.startWorkers()
}

// startWorkers starts goroutines up to the thread count (under mu).
func (p *Pool) startWorkers() {
	for !p.closed && p.running < max(p.cfg.Threads, 1) && len(p.queue) > 0 {
		p.running++
		p.stats.Running.Store(int64(p.running))
		go p.work()
	}
}

func (p *Pool) work() {
	for {
		p.mu.Lock()
		if len(p.queue) == 0 || p.closed || p.running > max(p.cfg.Threads, 1) {
			p.running--
			p.stats.Running.Store(int64(p.running))
			p.mu.Unlock()
			return
		}
		best := 0
		for i, j := range p.queue {
			if j.ratio > p.queue[best].ratio {
				best = i
			}
		}
		j := p.queue[best]
		p.queue = append(p.queue[:best], p.queue[best+1:]...)
		p.stats.Queued.Store(int64(len(p.queue)))
		opts := partlog.CleanOptions{MapBytes: p.cfg.DedupeBytes / int64(max(p.cfg.Threads, 1)), Throttle: p.throttle}
		p.mu.Unlock()
		start := time.Now()
		j.run(opts)
		p.stats.PassNanos.Add(int64(time.Since(start)))
	}
}

// throttle sleeps as needed to keep every pass's reads and writes under
// log.cleaner.io.max.bytes.per.second together (a token bucket of one
// second's worth). It counts the bytes and the sleep it imposed, so that
// the limit can be checked on the cleaner's own accounting: IOBytes ≤
// rate × PassNanos + one second's worth per idle gap, and ThrottleNanos ≤
// IOBytes / rate (a second slept earns a second's worth). A sleep ends
// early when the configs change (the limit is then looked at again) or
// the pool closes (the pass goes on unthrottled to its end).
func (p *Pool) throttle(n int) {
	p.stats.IOBytes.Add(int64(n))
	p.mu.Lock()
	defer p.mu.Unlock()
	charged := false
	for !p.closed {
		rate := p.cfg.IOBytesPerSec
		if rate <= 0 || rate >= math.MaxFloat64/2 {
			return
		}
		now := p.now()
		p.tokens = min(p.tokens+now.Sub(p.refill).Seconds()*rate, rate)
		p.refill = now
		if !charged {
			p.tokens -= float64(n)
			charged = true
		}
		wait := time.Duration(-p.tokens / rate * float64(time.Second))
		if wait <= 0 {
			return
		}
		wake, sleep := p.changed, p.sleep
		p.mu.Unlock()
		p.stats.ThrottleNanos.Add(int64(sleep(wait, wake)))
		p.mu.Lock()
	}
}

// Done records a finished pass (from the partition actor).
func (p *Pool) Done(st partlog.CleanStats, err error) {
	if err != nil {
		p.stats.Failures.Add(1)
		return
	}
	p.stats.Passes.Add(1)
	p.stats.BytesRead.Add(st.BytesRead)
	p.stats.BytesWritten.Add(st.BytesWritten)
	p.stats.RecordsRemoved.Add(st.RecordsRemoved)
	p.stats.LastPassUnixMs.Store(time.Now().UnixMilli())
	l := lastPass{read: st.BytesRead, written: st.BytesWritten, elapsed: st.Elapsed, delay: st.CompactionDelay}
	if st.MapBudget > 0 {
		l.util = float64(st.MapBytes) / float64(st.MapBudget)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = append(p.last, l)
	if n := max(p.cfg.Threads, 1); len(p.last) > n {
		p.last = append(p.last[:0], p.last[len(p.last)-n:]...)
	}
}

// Partitions is the number of compacted partitions checked.
func (p *Pool) Partitions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parts)
}

// MarkUncleanable counts a partition whose cleaner went offline.
func (p *Pool) MarkUncleanable() { p.stats.Uncleanable.Add(1) }

// Close stops the timer and the workers after their current pass.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.wake()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.queue = nil
	p.mu.Unlock()
}
