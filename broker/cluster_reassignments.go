package broker

// Which broker should own a unit, and the partition reassignments that
// choose it (issue 24): rendezvous hashing over the live brokers decides,
// unless an operator reassigned the unit (AlterPartitionReassignments,
// stored in etcd by coord) to a broker that is alive. The ownership loop
// (broker/cluster) claims and hands off by this answer, so a reassignment moves
// the partition with the usual graceful hand-off — there is no data to
// copy, the volume is shared. The same answer is the "preferred leader"
// of ElectLeaders.
//
// A partition has one replica in kaas (its owner; the data is on the
// shared volume), so a reassignment names the new owner first; further
// replicas it lists are accepted (as Apache accepts a change of
// replication factor unless asked not to) and recorded as nothing.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/coord"
	"kaas/state/ownership"
)

// preferredOwner is the broker that should own unit given the live
// members: the reassignment's broker while it is alive, else rendezvous.
func preferredOwner(v *coord.View, unit string, members []int32) int32 {
	r, ok := v.Reassignments[unit]
	return ownership.Preferred(unit, members, r.Broker, ok)
}

// unitOf names the unit behind a partition, internal topics' included
// (their partitions are coordinator slots); false for a partition that
// does not exist.
func (b *Broker) unitOf(topic string, p int32) (string, bool) {
	if it := internalByName(topic); it != nil {
		if !it.hasPartition(p) {
			return "", false
		}
		return internalSlotUnit(topic, p)
	}
	t := b.topics.load().byName[topic]
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return "", false
	}
	return ownership.PartitionUnit(topic, p), true
}

// reassignmentError is a reassignment refused, with Apache's code and
// message.
type reassignmentError struct {
	code int16
	msg  string
}

// checkReassignment is Apache's validateManualPartitionAssignment for a
// target replica list (non-empty, no broker twice, each one registered:
// alive, in kaas) plus KIP-860's refusal of a change of replication factor
// when the request forbids it. members are the live brokers.
func checkReassignment(replicas, members []int32, allowRFChange bool) *reassignmentError {
	if len(replicas) == 0 {
		return &reassignmentError{kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes an empty replica list."}
	}
	sorted := slices.Sorted(slices.Values(replicas))
	for i, id := range sorted {
		if !slices.Contains(members, id) {
			return &reassignmentError{kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("The manual partition assignment includes broker %d, but no such broker is registered.", id)}
		}
		if i > 0 && sorted[i-1] == id {
			return &reassignmentError{kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("The manual partition assignment includes the broker %d more than once.", id)}
		}
	}
	if !allowRFChange && len(replicas) != 1 {
		return &reassignmentError{kerr.InvalidReplicationFactor.Code, fmt.Sprintf("The replication factor is changed from 1 to %d", len(replicas))}
	}
	return nil
}

// clusterView is the cluster's current view and live member ids; for a
// single broker a view with this broker alone and nothing reassigned.
func (b *Broker) clusterView() (*coord.View, []int32) {
	v := b.view()
	if v == nil {
		return &coord.View{Owners: map[string]coord.Owner{}, Reassignments: map[string]coord.Reassignment{}}, []int32{b.cfg.BrokerID}
	}
	return v, v.MemberIDs()
}

// currentOwner is who owns unit now (-1: between owners); a single broker
// owns everything.
func (b *Broker) currentOwner(v *coord.View, unit string) int32 {
	if b.cluster == nil {
		return b.cfg.BrokerID
	}
	if o, ok := v.Owners[unit]; ok {
		return o.Broker
	}
	return -1
}

// kickOwnership makes the ownership loop reconcile now rather than at
// its next tick.
func (b *Broker) kickOwnership() {
	if b.cluster == nil {
		return
	}
	b.cluster.Kick()
}
