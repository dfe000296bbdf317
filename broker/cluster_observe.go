package broker

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"kaas/broker/admin"
	"kaas/broker/cluster"
	"kaas/broker/peers"
	"kaas/state/ownership"
)

// clusterSource reports a cluster-mode broker's ownership to /metrics and
// the admin listener's /api/cluster.
type clusterSource struct {
	cm    *cluster.Loop
	peers *peers.Client
}

func (s clusterSource) MarkersInFlight() int64    { return s.peers.MarkersInFlight() }
func (s clusterSource) PeerMarkers() int64        { return s.peers.MarkersSent() }
func (s clusterSource) PeerMarkerRequests() int64 { return s.peers.MarkerRequests() }
func (s clusterSource) PeerVerifications() int64  { return s.peers.Verifications() }
func (s clusterSource) PeerFailures() int64       { return s.peers.Failures() }

func (s clusterSource) LeaseRemaining() time.Duration { return s.cm.Session().Remaining() }
func (s clusterSource) Handoffs() int64               { return s.cm.Handoffs() }
func (s clusterSource) Takeovers() int64              { return s.cm.Takeovers() }
func (s clusterSource) KeepAliveFailures() int64      { return s.cm.Session().Failures() }
func (s clusterSource) Owned() map[string]int32       { return s.cm.Owned() }

func (s clusterSource) Members() int {
	if v := s.cm.View(); v != nil {
		return len(v.Members)
	}
	return 0
}

// ClusterStatus is the admin listener's /api/cluster answer.
type ClusterStatus struct {
	BrokerID       int32            `json:"broker_id"`
	Cluster        string           `json:"cluster"`
	LeaseDeadline  time.Time        `json:"lease_deadline"`
	LeaseRemaining string           `json:"lease_remaining"`
	Alive          bool             `json:"alive"`
	Ready          bool             `json:"ready"`
	Members        []int32          `json:"members"`
	Owned          map[string]int32 `json:"owned"` // unit → leader epoch
	Handoffs       int64            `json:"handoffs"`
	Takeovers      int64            `json:"takeovers"`
	KeepAliveFails int64            `json:"keepalive_failures"`
	// CoordinatorSlots counts, per broker id, the transaction-state and
	// group-offsets slots it owns (50 of each in all; fewer between
	// owners).
	CoordinatorSlots  map[int32]SlotCounts `json:"coordinator_slots"`
	MarkersInFlight   int64                `json:"peer_markers_in_flight"`
	PeerMarkers       int64                `json:"peer_markers"`
	PeerMarkerReqs    int64                `json:"peer_marker_requests"`
	PeerVerifications int64                `json:"peer_verifications"`
	PeerFailures      int64                `json:"peer_request_failures"`
}

// clusterStatus is nil in single-broker mode.
func (b *Broker) clusterStatus() any {
	cm := b.cluster
	if cm == nil {
		return nil
	}
	s := clusterSource{cm, b.peers}
	st := ClusterStatus{
		BrokerID: b.cfg.BrokerID, Cluster: b.cfg.ClusterName,
		LeaseDeadline: cm.Session().Deadline(), LeaseRemaining: cm.Session().Remaining().Round(time.Millisecond).String(),
		Alive: cm.Session().Alive(), Ready: b.Ready(), Owned: s.Owned(),
		Handoffs: s.Handoffs(), Takeovers: s.Takeovers(), KeepAliveFails: s.KeepAliveFailures(),
		CoordinatorSlots: b.coordinatorSlots(), MarkersInFlight: s.MarkersInFlight(), PeerMarkers: s.PeerMarkers(), PeerMarkerReqs: s.PeerMarkerRequests(), PeerVerifications: s.PeerVerifications(), PeerFailures: s.PeerFailures(),
	}
	for _, m := range b.liveBrokers("") {
		st.Members = append(st.Members, m.ID)
	}
	return st
}

// Ready reports whether the broker serves everything it should: always
// once started for a single broker; in a cluster, once its lease is alive
// and every unit it should own is claimed and loaded (Kubernetes'
// readiness probe, /readyz).
func (b *Broker) Ready() bool {
	select {
	case <-b.ready:
	default:
		return false
	}
	if b.cluster == nil {
		return true
	}
	return b.cluster.Session().Alive() && b.cluster.Settled()
}

// clusterPanel is the inspector overview's table of the cluster's
// brokers: each live member, its address, what it leads and whether it
// holds the coordinators (admin.Config.Panels; no rows, so no panel, for
// a single broker).
func (b *Broker) clusterPanel() admin.Panel {
	p := admin.Panel{Title: "Cluster brokers", Columns: []string{"broker", "address", "rack", "partitions led", "txn slots", "offsets slots", "this broker"}}
	v := b.view()
	if v == nil {
		return p
	}
	led := map[int32]int{}
	for unit, o := range v.Owners {
		if _, _, ok := ownership.ParsePartitionUnit(unit); ok {
			led[o.Broker]++
		}
	}
	coordinators := b.coordinatorSlots()
	for _, m := range b.liveBrokers("") {
		cs := coordinators[m.ID]
		row := []string{strconv.Itoa(int(m.ID)), net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port))), m.Rack, strconv.Itoa(led[m.ID]),
			strconv.Itoa(cs.Txn), strconv.Itoa(cs.Offsets), ""}
		if m.ID == b.cfg.BrokerID {
			row[6] = fmt.Sprintf("lease %s left", b.cluster.Session().Remaining().Round(time.Millisecond))
		}
		p.Rows = append(p.Rows, row)
	}
	return p
}
