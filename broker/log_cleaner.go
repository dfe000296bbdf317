package broker

import (
	"math"
	"strconv"
	"strings"
	"time"

	"kaas/actors/cleaner"
	"kaas/metrics"
	"kaas/state/brokerconfig"
)

// The log cleaner pool (actors/cleaner) is configured from the
// log.cleaner.* broker configs, whichever layer they come from, and
// reconfigured when they are altered (KIP-226).

// startCleaner creates the pool and exports its metrics.
func (b *Broker) startCleaner() {
	b.cleaner = cleaner.New(cleanerConfig(b.configs.Load()), b.log)
	pool := b.cleaner
	b.metrics.WatchCleaner(func() metrics.CleanerStats {
		s, r := pool.Stats(), pool.Recent()
		return metrics.CleanerStats{
			Passes: s.Passes.Load(), Failures: s.Failures.Load(),
			BytesRead: s.BytesRead.Load(), BytesWritten: s.BytesWritten.Load(),
			RecordsRemoved: s.RecordsRemoved.Load(), LastPassUnixMs: s.LastPassUnixMs.Load(), NowUnixMs: time.Now().UnixMilli(),
			MaxDirtyRatio: s.MaxDirtyRatio(), UncleanablePartitions: s.Uncleanable.Load(),
			Running: s.Running.Load(), Queued: s.Queued.Load(), Partitions: int64(pool.Partitions()),
			IOBytes: s.IOBytes.Load(), ThrottleNanos: s.ThrottleNanos.Load(), PassNanos: s.PassNanos.Load(),
			MaxBufferUtilization: r.MaxBufferUtilization, Recopy: r.Recopy,
			MaxCleanSeconds: r.MaxCleanTime.Seconds(), MaxCompactionDelaySeconds: r.MaxCompactionDelay.Seconds(),
		}
	})
}

// cleanerConfig reads the pool's configs from the broker config layers.
func cleanerConfig(l *brokerconfig.Layers) cleaner.Config {
	c := cleaner.DefaultConfig()
	value := func(name string) (string, bool) {
		v, _ := l.Value(name)
		if v == nil {
			return "", false
		}
		return strings.TrimSpace(*v), true
	}
	if v, ok := value("log.cleaner.enable"); ok {
		c.Enabled = !strings.EqualFold(v, "false")
	}
	if v, ok := value("log.cleaner.threads"); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			c.Threads = n
		}
	}
	if v, ok := value("log.cleaner.dedupe.buffer.size"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			c.DedupeBytes = n
		}
	}
	if v, ok := value("log.cleaner.io.max.bytes.per.second"); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			c.IOBytesPerSec = min(f, math.MaxFloat64)
		}
	}
	if v, ok := value("log.cleaner.backoff.ms"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			c.Backoff = time.Duration(n) * time.Millisecond
		}
	}
	return c
}
