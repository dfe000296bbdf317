package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// SharePartition is one share-partition's figures at scrape time (share
// groups, KIP-932). The counters start again at a restart.
type SharePartition struct {
	Group, Topic        string
	Partition           int32
	Start               int64
	Available, Acquired int
	Acquisitions        uint64
	Redelivered         uint64
	Archived            uint64
	Expired             uint64
	Accepted            uint64
	Released            uint64
}

// RegisterShares exports the share-partitions src reports at each scrape
// (a broker started again on the same registry replaces the source).
func (m *Metrics) RegisterShares(src func() []SharePartition) {
	if m.shares == nil {
		m.shares = &shareCollector{}
		m.Registry.MustRegister(m.shares)
		m.collectors = append(m.collectors, m.shares)
	}
	m.shares.src.Store(&src)
}

var (
	shareLabels       = []string{"group", "topic", "partition"}
	shareStartOffset  = prometheus.NewDesc("kaas_share_partition_start_offset", "A share-partition's start offset (SPSO): every record below it is acknowledged or archived.", shareLabels, nil)
	shareInFlight     = prometheus.NewDesc("kaas_share_records_in_flight", "Records of a share-partition's window not yet done, by state: available (to be delivered again) or acquired (under a lock).", append(shareLabels, "state"), nil)
	shareAcquired     = prometheus.NewDesc("kaas_share_records_acquired_total", "Records handed to share group members (first deliveries and redeliveries).", shareLabels, nil)
	shareRedelivered  = prometheus.NewDesc("kaas_share_records_redelivered_total", "Records handed to a share group member again (delivery count above 1).", shareLabels, nil)
	shareArchived     = prometheus.NewDesc("kaas_share_records_archived_total", "Records archived: rejected, delivered group.share.delivery.count.limit times, or aborted (read_committed).", shareLabels, nil)
	shareLockExpiries = prometheus.NewDesc("kaas_share_lock_expiries_total", "Acquisition locks that ran out before their record was acknowledged.", shareLabels, nil)
	shareAcknowledged = prometheus.NewDesc("kaas_share_records_acknowledged_total", "Records accepted by share group members.", shareLabels, nil)
	shareReleased     = prometheus.NewDesc("kaas_share_records_released_total", "Records released by their share group member for redelivery.", shareLabels, nil)
	shareDescs        = []*prometheus.Desc{shareStartOffset, shareInFlight, shareAcquired, shareRedelivered, shareArchived, shareLockExpiries, shareAcknowledged, shareReleased}
)

type shareCollector struct {
	src atomic.Pointer[func() []SharePartition]
}

func (c *shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range shareDescs {
		ch <- d
	}
}

func (c *shareCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.src.Load()
	if src == nil {
		return
	}
	for _, p := range (*src)() {
		l := []string{p.Group, p.Topic, strconv.Itoa(int(p.Partition))}
		ch <- prometheus.MustNewConstMetric(shareStartOffset, prometheus.GaugeValue, float64(p.Start), l...)
		ch <- prometheus.MustNewConstMetric(shareInFlight, prometheus.GaugeValue, float64(p.Available), append(l, "available")...)
		ch <- prometheus.MustNewConstMetric(shareInFlight, prometheus.GaugeValue, float64(p.Acquired), append(l, "acquired")...)
		for _, v := range []struct {
			d *prometheus.Desc
			n uint64
		}{{shareAcquired, p.Acquisitions}, {shareRedelivered, p.Redelivered}, {shareArchived, p.Archived}, {shareLockExpiries, p.Expired}, {shareAcknowledged, p.Accepted}, {shareReleased, p.Released}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n), l...)
		}
	}
}
