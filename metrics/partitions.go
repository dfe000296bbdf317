package metrics

import (
	"iter"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionStats is one partition as a scrape sees it: read from the
// partition's published view, never from the actor, so a scrape costs the
// partitions nothing and costs nothing per append.
type PartitionStats struct {
	Topic          string
	Partition      int32
	LogStart       int64
	HighWatermark  int64
	LastStable     int64
	LogEnd         int64
	SizeBytes      int64
	Segments       int
	ProducerIDs    int
	ReadCommitLag  int64 // LogEnd - LastStable, the LSO lag
	LeaderIsBroker bool
	// Offline: a disk write or fsync failed; the partition refuses
	// reads and writes until a restart.
	Offline bool
}

// partitionCollector turns a partition source into per-partition gauges at
// scrape time. The source is swapped in by the broker once its partitions
// exist (and again by a restarted broker reusing the same Metrics).
type partitionCollector struct {
	src atomic.Pointer[iter.Seq[PartitionStats]]
	// openFiles counts the segment files open now (they are opened on
	// demand and closed when idle; nil: not reported).
	openFiles atomic.Pointer[func() int]

	logStart, hw, lso, lsoLag, logEnd, size, segments, producers, offline *prometheus.Desc
	partitions, leaders, topics, offlineCount, openFilesDesc              *prometheus.Desc
}

func newPartitionCollector() *partitionCollector {
	pl := []string{"topic", "partition"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &partitionCollector{
		logStart:     d("kaas_partition_log_start_offset", "First readable offset of the partition (log start offset).", pl),
		hw:           d("kaas_partition_high_watermark", "High watermark: everything below is durable and readable.", pl),
		lso:          d("kaas_partition_last_stable_offset", "Last stable offset: read_committed consumers read up to here.", pl),
		lsoLag:       d("kaas_partition_lso_lag", "Log end offset minus last stable offset: offsets held back by open transactions (and by unsynced appends).", pl),
		logEnd:       d("kaas_partition_log_end_offset", "Offset the next appended batch gets, as of the last published view.", pl),
		size:         d("kaas_partition_log_size_bytes", "Bytes in the partition's segments.", pl),
		segments:     d("kaas_partition_segments", "Segments in the partition's log.", pl),
		producers:    d("kaas_partition_producer_ids", "Producer ids with idempotent or transactional state on the partition (active producer ids).", pl),
		offline:      d("kaas_partition_offline", "1 when a disk write or fsync failed for the partition: it answers KAFKA_STORAGE_ERROR until a restart recovers it.", pl),
		offlineCount: d("kaas_offline_partitions", "Partitions offline after a disk failure (Apache's OfflinePartitionsCount).", nil),
		partitions:   d("kaas_partitions", "Partitions hosted by this broker.", nil),
		leaders:      d("kaas_partition_leaders", "Partitions this broker leads.", nil),
		topics:       d("kaas_topics", "Topics on this broker.", nil),
		openFilesDesc: d("kaas_open_segment_files", "Segment files open now: opened on demand, closed after about 10 s unused "+
			"or, over the cap (a quarter of the descriptor limit), least recently used first; an idle partition holds none.", nil),
	}
}

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.logStart, c.hw, c.lso, c.lsoLag, c.logEnd, c.size, c.segments, c.producers, c.offline, c.partitions, c.leaders, c.topics, c.offlineCount, c.openFilesDesc} {
		ch <- d
	}
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	var parts, leaders, offline int
	topics := map[string]struct{}{}
	if src := c.src.Load(); src != nil {
		for p := range *src {
			parts++
			if p.LeaderIsBroker {
				leaders++
			}
			topics[p.Topic] = struct{}{}
			lv := []string{p.Topic, strconv.Itoa(int(p.Partition))}
			g := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
			}
			g(c.logStart, float64(p.LogStart))
			g(c.hw, float64(p.HighWatermark))
			g(c.lso, float64(p.LastStable))
			g(c.lsoLag, float64(p.ReadCommitLag))
			g(c.logEnd, float64(p.LogEnd))
			g(c.size, float64(p.SizeBytes))
			g(c.segments, float64(p.Segments))
			g(c.producers, float64(p.ProducerIDs))
			off := 0.0
			if p.Offline {
				off = 1
				offline++
			}
			g(c.offline, off)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(parts))
	ch <- prometheus.MustNewConstMetric(c.leaders, prometheus.GaugeValue, float64(leaders))
	ch <- prometheus.MustNewConstMetric(c.topics, prometheus.GaugeValue, float64(len(topics)))
	ch <- prometheus.MustNewConstMetric(c.offlineCount, prometheus.GaugeValue, float64(offline))
	if f := c.openFiles.Load(); f != nil {
		ch <- prometheus.MustNewConstMetric(c.openFilesDesc, prometheus.GaugeValue, float64((*f)()))
	}
}

// WatchPartitions makes scrapes report the partitions src yields. src is
// iterated once per scrape, on the scraping goroutine.
func (m *Metrics) WatchPartitions(src iter.Seq[PartitionStats]) { m.partitions.src.Store(&src) }

// WatchOpenSegmentFiles makes scrapes report kaas_open_segment_files from
// count.
func (m *Metrics) WatchOpenSegmentFiles(count func() int) { m.partitions.openFiles.Store(&count) }
