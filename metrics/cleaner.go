package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// CleanerStats is the log cleaner as a scrape sees it (Apache's
// kafka.log:type=LogCleaner and LogCleanerManager metrics).
type CleanerStats struct {
	Passes, Failures            int64
	BytesRead, BytesWritten     int64
	RecordsRemoved              int64
	LastPassUnixMs              int64 // 0: none yet
	NowUnixMs                   int64
	MaxDirtyRatio               float64
	UncleanablePartitions       int64
	Running, Queued, Partitions int64
	IOBytes, ThrottleNanos      int64
	PassNanos                   int64
	// Over the last passes, one per cleaner thread (cleaner.Recent).
	MaxBufferUtilization, Recopy float64
	MaxCleanSeconds              float64
	MaxCompactionDelaySeconds    float64
}

type cleanerCollector struct {
	src atomic.Pointer[func() CleanerStats]

	passes, failures, read, written, removed, sinceLast, dirty, uncleanable, running, queued, partitions, ioBytes, throttle, passTime *prometheus.Desc
	bufferUtil, recopy, cleanTime, compactionDelay, deadThreads                                                                       *prometheus.Desc
}

func newCleanerCollector() *cleanerCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &cleanerCollector{
		passes:      d("kaas_log_cleaner_passes_total", "Cleaning passes swapped in."),
		failures:    d("kaas_log_cleaner_failures_total", "Cleaning passes that failed (a write or fsync error, a batch that does not decode): that partition's cleaner goes offline."),
		read:        d("kaas_log_cleaner_bytes_read_total", "Bytes of log the cleaner read (mapping and copying)."),
		written:     d("kaas_log_cleaner_bytes_written_total", "Bytes of cleaned segments the cleaner wrote."),
		removed:     d("kaas_log_cleaner_records_removed_total", "Records the cleaner removed: superseded, expired tombstones and markers, aborted data."),
		sinceLast:   d("kaas_log_cleaner_seconds_since_last_pass", "Seconds since the last pass finished (Apache's time-since-last-run-ms); -1 before the first."),
		dirty:       d("kaas_log_cleaner_max_dirty_ratio", "The largest dirty ratio a pass was started with (Apache's max-dirty-percent, as a fraction)."),
		uncleanable: d("kaas_log_cleaner_uncleanable_partitions", "Partitions whose cleaner is offline after a failed pass (Apache's uncleanable-partitions-count); a restart retries them."),
		running:     d("kaas_log_cleaner_running", "Passes running now (at most log.cleaner.threads)."),
		queued:      d("kaas_log_cleaner_queued", "Passes waiting for a cleaner thread."),
		partitions:  d("kaas_log_cleaner_partitions", "Compacted partitions the cleaner checks."),
		ioBytes:     d("kaas_log_cleaner_io_bytes_total", "Bytes the cleaner's passes read and wrote, as its throttle (log.cleaner.io.max.bytes.per.second) counted them."),
		passTime:    d("kaas_log_cleaner_pass_seconds_total", "Seconds the cleaner's passes ran: reading, writing, fsyncing and throttled (Apache's clean time)."),
		throttle:    d("kaas_log_cleaner_throttle_seconds_total", "Seconds the throttle made passes sleep to stay under log.cleaner.io.max.bytes.per.second."),
		bufferUtil: d("kaas_log_cleaner_max_buffer_utilization_ratio",
			"The largest share of its dedupe buffer a pass's key map filled, over the last pass of each cleaner thread (Apache's max-buffer-utilization-percent, as a fraction)."),
		recopy: d("kaas_log_cleaner_recopy_ratio",
			"Bytes written over bytes read by the last pass of each cleaner thread (Apache's cleaner-recopy-percent, as a fraction)."),
		cleanTime: d("kaas_log_cleaner_max_clean_time_seconds",
			"The longest of the last pass of each cleaner thread (Apache's max-clean-time-secs)."),
		compactionDelay: d("kaas_log_cleaner_max_compaction_delay_seconds",
			"How far past max.compaction.lag.ms the first dirty record of a partition was when its pass started, the most over the last pass of each cleaner thread (Apache's max-compaction-delay-secs)."),
		deadThreads: d("kaas_log_cleaner_dead_threads",
			"Cleaner threads that died (Apache's DeadThreadCount). Always 0: a failed pass takes only its partition's cleaner offline, never a thread."),
	}
}

// WatchCleaner makes scrapes report the cleaner src describes.
func (m *Metrics) WatchCleaner(src func() CleanerStats) { m.cleaner.src.Store(&src) }

func (c *cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.passes, c.failures, c.read, c.written, c.removed, c.sinceLast, c.dirty, c.uncleanable, c.running, c.queued, c.partitions, c.ioBytes, c.throttle, c.passTime,
		c.bufferUtil, c.recopy, c.cleanTime, c.compactionDelay, c.deadThreads} {
		ch <- d
	}
}

func (c *cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	s := (*src)()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(c.passes, s.Passes)
	counter(c.failures, s.Failures)
	counter(c.read, s.BytesRead)
	counter(c.written, s.BytesWritten)
	counter(c.removed, s.RecordsRemoved)
	since := -1.0
	if s.LastPassUnixMs > 0 {
		since = float64(s.NowUnixMs-s.LastPassUnixMs) / 1000
	}
	gauge(c.sinceLast, since)
	gauge(c.dirty, s.MaxDirtyRatio)
	gauge(c.uncleanable, float64(s.UncleanablePartitions))
	gauge(c.running, float64(s.Running))
	gauge(c.queued, float64(s.Queued))
	gauge(c.partitions, float64(s.Partitions))
	counter(c.ioBytes, s.IOBytes)
	ch <- prometheus.MustNewConstMetric(c.throttle, prometheus.CounterValue, float64(s.ThrottleNanos)/1e9)
	ch <- prometheus.MustNewConstMetric(c.passTime, prometheus.CounterValue, float64(s.PassNanos)/1e9)
	gauge(c.bufferUtil, s.MaxBufferUtilization)
	gauge(c.recopy, s.Recopy)
	gauge(c.cleanTime, s.MaxCleanSeconds)
	gauge(c.compactionDelay, s.MaxCompactionDelaySeconds)
	gauge(c.deadThreads, 0)
}
