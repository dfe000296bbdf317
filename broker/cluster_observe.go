package broker

import (
	"maps"
	"time"
)

// clusterSource reports a cluster-mode broker's ownership to /metrics and
// the admin listener's /api/cluster.
type clusterSource struct{ cm *clusterMode }

func (s clusterSource) LeaseRemaining() time.Duration { return s.cm.sess.Remaining() }
func (s clusterSource) Handoffs() int64               { return s.cm.handoffs.Load() }
func (s clusterSource) Takeovers() int64              { return s.cm.takeover.Load() }
func (s clusterSource) KeepAliveFailures() int64      { return s.cm.sess.Failures() }

func (s clusterSource) Members() int {
	if s.cm.watch == nil {
		return 0
	}
	return len(s.cm.watch.View().Members)
}

func (s clusterSource) Owned() map[string]int32 {
	s.cm.mu.Lock()
	defer s.cm.mu.Unlock()
	return maps.Clone(s.cm.epochs)
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
}

// clusterStatus is nil in single-broker mode.
func (b *Broker) clusterStatus() any {
	cm := b.cluster
	if cm == nil {
		return nil
	}
	s := clusterSource{cm}
	st := ClusterStatus{
		BrokerID: b.cfg.BrokerID, Cluster: b.cfg.ClusterName,
		LeaseDeadline: cm.sess.Deadline(), LeaseRemaining: cm.sess.Remaining().Round(time.Millisecond).String(),
		Alive: cm.sess.Alive(), Ready: b.Ready(), Owned: s.Owned(),
		Handoffs: s.Handoffs(), Takeovers: s.Takeovers(), KeepAliveFails: s.KeepAliveFailures(),
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
	return b.cluster.sess.Alive() && b.cluster.settled.Load()
}
