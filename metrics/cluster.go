package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterSource is what a cluster-mode broker reports at scrape time.
type ClusterSource interface {
	// LeaseRemaining is how long the broker may still act without a
	// successful keep-alive (≤ 0: it has stopped acknowledging).
	LeaseRemaining() time.Duration
	Members() int
	// Owned maps each unit this broker owns (p/<topic>/<n>, t/<n>, g/<n>)
	// to its leader epoch.
	Owned() map[string]int32
	Handoffs() int64
	Takeovers() int64
	KeepAliveFailures() int64
	// MarkersInFlight is transaction markers on their way to peer
	// brokers; PeerVerifications counts transactional batches verified
	// with a peer coordinator; PeerFailures counts requests to peers that
	// failed (each is retried).
	MarkersInFlight() int64
	// PeerMarkers counts markers sent to peers, PeerMarkerRequests the
	// WriteTxnMarkers requests that carried them (one per broker at a
	// time, each with every marker waiting for that broker).
	PeerMarkers() int64
	PeerMarkerRequests() int64
	PeerVerifications() int64
	PeerFailures() int64
}

// RegisterCluster exports the cluster figures of src (cluster mode only).
func (m *Metrics) RegisterCluster(src ClusterSource) {
	m.Registry.MustRegister(&clusterCollector{src: src})
}

var (
	clusterLeaseRemaining = prometheus.NewDesc("kaas_cluster_lease_remaining_seconds",
		"Time left before this broker's lease could expire, measured from the send time of its last successful keep-alive minus the safety margin; it stops acknowledging at 0.", nil, nil)
	clusterMembers = prometheus.NewDesc("kaas_cluster_members",
		"Live brokers registered in etcd.", nil, nil)
	clusterUnitsOwned = prometheus.NewDesc("kaas_cluster_units_owned",
		"Units this broker owns, by kind: partition, txn_slot (transaction-state slots, 50 in all) and offsets_slot (group-offsets slots, 50 in all).", []string{"kind"}, nil)
	clusterLeaderEpoch = prometheus.NewDesc("kaas_cluster_leader_epoch",
		"Leader epoch of each unit this broker owns.", []string{"unit"}, nil)
	clusterHandoffs = prometheus.NewDesc("kaas_cluster_handoffs_total",
		"Units this broker handed off gracefully (stopped, fsynced, released).", nil, nil)
	clusterTakeovers = prometheus.NewDesc("kaas_cluster_takeovers_total",
		"Units this broker claimed and opened.", nil, nil)
	clusterKeepAliveFailures = prometheus.NewDesc("kaas_cluster_keepalive_failures_total",
		"Lease keep-alives that failed.", nil, nil)
	clusterMarkersInFlight = prometheus.NewDesc("kaas_cluster_peer_markers_in_flight",
		"Transaction markers sent to peer brokers (WriteTxnMarkers) and not answered yet.", nil, nil)
	clusterPeerMarkers = prometheus.NewDesc("kaas_cluster_peer_markers_total",
		"Transaction markers sent to peer brokers (retries included).", nil, nil)
	clusterPeerMarkerRequests = prometheus.NewDesc("kaas_cluster_peer_marker_requests_total",
		"WriteTxnMarkers requests sent to peer brokers: each carries every marker waiting for its broker.", nil, nil)
	clusterPeerVerifications = prometheus.NewDesc("kaas_cluster_peer_verifications_total",
		"Transactional batches verified with a peer coordinator (AddPartitionsToTxn v4).", nil, nil)
	clusterPeerFailures = prometheus.NewDesc("kaas_cluster_peer_request_failures_total",
		"Requests to peer brokers that failed (markers and verifications are retried).", nil, nil)
)

type clusterCollector struct{ src ClusterSource }

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{clusterLeaseRemaining, clusterMembers, clusterUnitsOwned, clusterLeaderEpoch, clusterHandoffs, clusterTakeovers, clusterKeepAliveFailures,
		clusterMarkersInFlight, clusterPeerMarkers, clusterPeerMarkerRequests, clusterPeerVerifications, clusterPeerFailures} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	remaining := c.src.LeaseRemaining().Seconds()
	if remaining < 0 {
		remaining = 0
	}
	ch <- prometheus.MustNewConstMetric(clusterLeaseRemaining, prometheus.GaugeValue, remaining)
	ch <- prometheus.MustNewConstMetric(clusterMembers, prometheus.GaugeValue, float64(c.src.Members()))
	kinds := map[string]int{"partition": 0, "txn_slot": 0, "offsets_slot": 0}
	for unit, epoch := range c.src.Owned() {
		switch {
		case len(unit) > 2 && unit[:2] == "p/":
			kinds["partition"]++
		case len(unit) > 2 && unit[:2] == "t/":
			kinds["txn_slot"]++
		case len(unit) > 2 && unit[:2] == "g/":
			kinds["offsets_slot"]++
		}
		ch <- prometheus.MustNewConstMetric(clusterLeaderEpoch, prometheus.GaugeValue, float64(epoch), unit)
	}
	for kind, n := range kinds {
		ch <- prometheus.MustNewConstMetric(clusterUnitsOwned, prometheus.GaugeValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(clusterHandoffs, prometheus.CounterValue, float64(c.src.Handoffs()))
	ch <- prometheus.MustNewConstMetric(clusterTakeovers, prometheus.CounterValue, float64(c.src.Takeovers()))
	ch <- prometheus.MustNewConstMetric(clusterKeepAliveFailures, prometheus.CounterValue, float64(c.src.KeepAliveFailures()))
	ch <- prometheus.MustNewConstMetric(clusterMarkersInFlight, prometheus.GaugeValue, float64(c.src.MarkersInFlight()))
	ch <- prometheus.MustNewConstMetric(clusterPeerMarkers, prometheus.CounterValue, float64(c.src.PeerMarkers()))
	ch <- prometheus.MustNewConstMetric(clusterPeerMarkerRequests, prometheus.CounterValue, float64(c.src.PeerMarkerRequests()))
	ch <- prometheus.MustNewConstMetric(clusterPeerVerifications, prometheus.CounterValue, float64(c.src.PeerVerifications()))
	ch <- prometheus.MustNewConstMetric(clusterPeerFailures, prometheus.CounterValue, float64(c.src.PeerFailures()))
}
