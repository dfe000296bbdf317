package cleaner

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"kaas/storage/partlog"
)

// TestThrottleAccounting: the throttle's token bucket on a fake clock.
// Every byte is counted; from an empty bucket, n bytes at rate r sleep
// exactly n/r less the time that passed working; a bucket refilled by
// idle time lets one second's worth through unslept, no more.
func TestThrottleAccounting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rate    float64
		idle    time.Duration // before the first chunk
		chunks  []int
		work    time.Duration // between chunks, not sleeping
		wantIO  int64
		wantNap time.Duration
	}{
		{name: "unlimited", rate: 0, chunks: []int{1 << 20, 1 << 20}, wantIO: 2 << 20},
		{name: "from empty", rate: 1000, chunks: []int{500, 500, 1000}, wantIO: 2000, wantNap: 2 * time.Second},
		{name: "work earns tokens", rate: 1000, chunks: []int{1000, 1000}, work: 500 * time.Millisecond, wantIO: 2000, wantNap: 1500 * time.Millisecond},
		{name: "idle banks one second", rate: 1000, idle: time.Hour, chunks: []int{1000, 1000}, wantIO: 2000, wantNap: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			cfg := DefaultConfig()
			if tc.rate > 0 {
				cfg.IOBytesPerSec = tc.rate
			}
			p := &Pool{log: slog.Default(), cfg: cfg, parts: map[string]func(){}, refill: clock, changed: make(chan struct{}),
				now: func() time.Time { return clock }, sleep: func(d time.Duration, _ <-chan struct{}) time.Duration { clock = clock.Add(d); return d }}
			clock = clock.Add(tc.idle)
			for _, n := range tc.chunks {
				p.throttle(n)
				clock = clock.Add(tc.work)
			}
			if got := p.stats.IOBytes.Load(); got != tc.wantIO {
				t.Errorf("IOBytes %d, want %d", got, tc.wantIO)
			}
			if got := time.Duration(p.stats.ThrottleNanos.Load()); got != tc.wantNap {
				t.Errorf("slept %v, want %v", got, tc.wantNap)
			}
		})
	}
}

// TestThrottleWakesOnChange: a pass sleeping under a limit of one byte a
// second (a sleep of about a week for a 1 MiB chunk) goes on as soon as
// the limit is lifted (KIP-226: a dynamic change applies to running
// passes), and one sleeping when the pool closes goes on to its end.
func TestThrottleWakesOnChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *Pool)
	}{
		{"limit lifted", func(p *Pool) { p.SetConfig(DefaultConfig()) }},
		{"pool closed", func(p *Pool) { p.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.IOBytesPerSec = 1
			p := New(cfg, slog.Default())
			defer p.Close()
			done := make(chan struct{})
			go func() {
				p.throttle(1 << 20)
				close(done)
			}()
			// Change only once the pass sleeps: its sleep is counted
			// when it ends, but the bucket's debt shows at once.
			for {
				p.mu.Lock()
				asleep := p.tokens < 0
				p.mu.Unlock()
				if asleep {
					break
				}
				time.Sleep(time.Millisecond) // polling the pool's state
			}
			tc.change(p)
			<-done // a hang here is the bug (the test binary's timeout ends it)
		})
	}
}

// TestRecentIsTheLastPassOfEachThread: Apache's gauges over each cleaner
// thread's last run are taken over the last log.cleaner.threads passes
// that succeeded: the maxima of their map fill, time and compaction
// delay, and their bytes written over bytes read together.
func TestRecentIsTheLastPassOfEachThread(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Threads = 2
	p := New(cfg, slog.Default())
	defer p.Close()
	if r := p.Recent(); r != (Recent{}) {
		t.Fatalf("before any pass: %+v", r)
	}
	p.Done(partlog.CleanStats{BytesRead: 1000, BytesWritten: 900, MapBytes: 90, MapBudget: 100, Elapsed: 9 * time.Second, CompactionDelay: time.Hour}, nil)
	p.Done(partlog.CleanStats{BytesRead: 1000, BytesWritten: 100, MapBytes: 20, MapBudget: 100, Elapsed: time.Second}, nil)
	p.Done(partlog.CleanStats{BytesRead: 3000, BytesWritten: 300, MapBytes: 50, MapBudget: 100, Elapsed: 2 * time.Second, CompactionDelay: time.Minute}, nil)
	p.Done(partlog.CleanStats{BytesRead: 1 << 30, MapBytes: 100, MapBudget: 100, Elapsed: time.Hour}, errors.New("failed"))
	want := Recent{MaxBufferUtilization: 0.5, Recopy: 0.1, MaxCleanTime: 2 * time.Second, MaxCompactionDelay: time.Minute}
	if r := p.Recent(); r != want {
		t.Fatalf("recent %+v, want %+v (the first pass and the failed one left out)", r, want)
	}
}
