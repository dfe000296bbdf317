package broker

// What the handlers read of the cluster: who leads a partition at which
// epoch, the live brokers, and whether a unit open here may still act.
// Each answers for a single broker too (this broker, epoch 0, always).

import (
	"sort"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/coord"
	"kaas/model"
	"kaas/model/slots"
	"kaas/state/ownership"
)

// partitionOwner is who leads a partition and at which epoch, from the
// cluster view; in single-broker mode, this broker at epoch 0.
func (b *Broker) partitionOwner(topic string, p int32) (leader, epoch int32, ok bool) {
	if b.cluster == nil {
		return b.cfg.BrokerID, 0, true
	}
	v := b.cluster.View()
	if v == nil {
		return -1, -1, false // still starting
	}
	unit, internal := internalSlotUnit(topic, p) // led by the slot's owner
	if !internal {
		unit = ownership.PartitionUnit(topic, p)
	}
	o, ok := v.Owners[unit]
	if !ok {
		return -1, -1, false
	}
	return o.Broker, o.Epoch, true
}

// liveBrokers lists the brokers to answer Metadata and DescribeCluster
// with, by id: this broker's address for the client's listener alone, or
// in a cluster every live member at the address it registered for that
// listener (as Apache's brokers register every listener's endpoint).
func (b *Broker) liveBrokers(listener string) []coord.Member {
	v := b.view()
	if v == nil {
		host, port := b.advertised(listener)
		return []coord.Member{{ID: b.cfg.BrokerID, Host: host, Port: port}}
	}
	out := make([]coord.Member, 0, len(v.Members))
	for _, m := range v.Members {
		if listener != "" {
			m.Host, m.Port = m.On(listener)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// view is the cluster view; nil for a single broker and while a cluster
// broker is still starting.
func (b *Broker) view() *coord.View {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.View()
}

// controllerID is what Metadata and DescribeCluster name as controller:
// the lowest live broker id (kaas has no controller; etcd decides).
func (b *Broker) controllerID() int32 {
	ms := b.liveBrokers("")
	if len(ms) == 0 {
		return -1
	}
	return ms[0].ID
}

// partitionGate is partition p of topic's actor's Gate: nil (always
// open) for a single broker (unless a test puts its lease in doubt); in
// a cluster closed until OpenUnit gives the partition the gate of the
// lease it was claimed under.
func (b *Broker) partitionGate(topic string, p int32) func() bool {
	if b.cluster == nil {
		if h := b.cfg.testHooks; h != nil && h.partitionInDoubt != nil {
			tp := model.TopicPartition{Topic: topic, Partition: p}
			return func() bool { return !h.partitionInDoubt(tp) }
		}
		return nil
	}
	return func() bool { return false }
}

// leaseAlive reports whether this broker holds a lease that is certainly
// alive (a cheap early refusal: each unit's own gate decides).
func (b *Broker) leaseAlive() bool { return b.cluster == nil || b.cluster.Session().Alive() }

// Kinds of coordinator slot (slotLeases' first index).
const (
	txnSlots     = 0
	offsetsSlots = 1
)

// slotLeases is the lease each coordinator slot open here was claimed
// under (0: not open), [0] transaction slots, [1] offsets slots: a slot's
// writes are acknowledged only while that lease is certainly alive
// (slotAlive).
type slotLeases [2][slots.Count]atomic.Int64

// slotAlive reports whether coordinator slot n of kind may write and
// acknowledge now: always for a single broker; in a cluster only while
// the lease the slot was claimed under is certainly alive.
func (b *Broker) slotAlive(kind, n int) bool {
	if h := b.cfg.testHooks; h != nil && h.leaseInDoubt != nil && h.leaseInDoubt(kind, n) {
		return false
	}
	if b.cluster == nil {
		return true
	}
	lease := coord.LeaseID(b.slotLease[kind][n].Load())
	return lease != 0 && b.cluster.Session().AliveUnder(lease)
}

// leaderEpochCode is Apache's check of a request's CurrentLeaderEpoch
// (Fetch v9+, ListOffsets v4+) against the epoch this broker leads the
// partition at: none given (-1) passes; an older one is
// FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
// UNKNOWN_LEADER_EPOCH (this broker is behind). Both make the client
// refresh its metadata and retry. A single broker leads at epoch 0.
func (b *Broker) leaderEpochCode(topic string, p int32, current int32) int16 {
	if current < 0 {
		return 0
	}
	var epoch int32
	if b.cluster != nil {
		e, ok := b.cluster.Epoch(ownership.PartitionUnit(topic, p))
		if !ok {
			return kerr.NotLeaderForPartition.Code
		}
		epoch = e
	}
	switch {
	case current < epoch:
		return kerr.FencedLeaderEpoch.Code
	case current > epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
