package broker

// Cluster mode (issue 10): N brokers on one shared data volume,
// coordinated by etcd through coord. The broker joins (a session, its
// registration, topic and config metadata in etcd) and wires the
// ownership loop (broker/cluster) to its units (cluster_units.go).

import (
	"context"
	"fmt"
	"net"

	"kaas/broker/cluster"
	"kaas/coord"
)

// joinCluster connects to etcd, registers this broker (refusing a
// duplicate id) and switches topic and config metadata to etcd.
func (b *Broker) joinCluster() error {
	addrs, err := b.clusterAddrs()
	if err != nil {
		return err
	}
	adv := addrs[b.cfg.listeners()[0].Name]
	sess, err := coord.Join(context.Background(), coord.Config{
		Endpoints:  b.cfg.ClusterEtcd,
		Cluster:    b.cfg.ClusterName,
		BrokerID:   b.cfg.BrokerID,
		Advertised: adv,
		Listeners:  addrs,
		Rack:       b.cfg.Rack,
		SessionTTL: b.cfg.SessionTTL,
		Logger:     b.log,
	})
	if err != nil {
		return err
	}
	if b.clusterID, err = sess.ClusterID(); err != nil {
		_ = sess.Close()
		return err
	}
	b.cluster = cluster.New(sess, b.cfg.BrokerID, clusterUnits{b}, b.log)
	b.topicStore = sess.Topics()
	b.configStore = sess.Configs()
	if b.peerSecret, err = sess.PeerSecret(); err != nil {
		_ = sess.Close()
		return err
	}
	if b.peers, err = b.newPeers(addrs); err != nil {
		_ = sess.Close()
		return err
	}
	return nil
}

// clusterAddrs is the address each listener advertises, registered in
// etcd for clients and peers: --advertised-listeners' (the first
// listener: also --advertised-listener), else the bound address, whose
// port must then be fixed.
func (b *Broker) clusterAddrs() (map[string]string, error) {
	out := map[string]string{}
	for i, l := range b.cfg.listeners() {
		adv := b.cfg.AdvertisedListeners[l.Name]
		if adv == "" && i == 0 {
			adv = b.cfg.AdvertisedAddr
		}
		if adv == "" {
			adv = l.Addr
		}
		if _, port, err := net.SplitHostPort(adv); err != nil || port == "0" {
			return nil, fmt.Errorf("cluster mode needs the address peers and clients reach listener %s at: give --advertised-listeners, or a fixed port (got %q)", l.Name, adv)
		}
		out[l.Name] = adv
	}
	return out, nil
}

// leaveCluster revokes the session (peers see this broker leave at once).
func (b *Broker) leaveCluster() error {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.Session().Close()
}

// startOwnership starts following etcd and claiming this broker's share.
func (b *Broker) startOwnership() error {
	if b.cluster == nil {
		return nil
	}
	if err := b.cluster.Start(); err != nil {
		return fmt.Errorf("watching the cluster: %w", err)
	}
	b.metrics.RegisterCluster(clusterSource{b.cluster, b.peers})
	return nil
}

// stopOwnership stops the loop and hands every owned unit off.
func (b *Broker) stopOwnership() {
	if b.cluster != nil {
		b.cluster.Stop()
	}
}
