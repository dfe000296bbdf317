package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 45, min: 0, max: 1, blocking: true, serve: serveAlterPartitionReassignments, fail: failAlterPartitionReassignments})
}

// serveAlterPartitionReassignments serves AlterPartitionReassignments (key
// 45), versions 0–1.
//
// A reassignment names the broker that should own the partition (the
// first replica; cluster_reassignments.go): stored in etcd, it overrides
// rendezvous hashing in every broker's ownership loop, which moves the
// partition there by the graceful hand-off (the old owner fsyncs, closes
// and releases; the new one claims and recovers it). The answer comes once
// the choice is stored, as Apache's once its record is; the move's
// progress is ListPartitionReassignments'. Replicas null cancels a
// reassignment in progress (NO_REASSIGNMENT_IN_PROGRESS when none is):
// rendezvous decides again.
//
// Errors as Apache's controller (ReplicationControlManager): an unknown
// topic or partition UNKNOWN_TOPIC_OR_PARTITION; an empty replica list, a
// broker named twice or one that is not alive INVALID_REPLICA_ASSIGNMENT
// (Apache's messages); with AllowReplicationFactorChange false (v1) a list
// of other than one replica INVALID_REPLICATION_FACTOR (a kaas partition
// has one). A single broker owns everything: a reassignment to itself
// changes nothing (NONE), to any other id is INVALID_REPLICA_ASSIGNMENT,
// as an Apache cluster of one answers. Internal topics' partitions are
// their coordinator slots, reassigned the same way.
//
// ACL: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED on the
// request and every partition. Blocking: etcd writes.
func serveAlterPartitionReassignments(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterPartitionAssignmentsRequest)
	if !b.sec.Access(c).Cluster(acl.Alter) {
		return failAlterPartitionReassignments(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	done, total := 0, 0
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition = rp.Partition
			if e := b.reassign(rt.Topic, rp.Partition, rp.Replicas, allowRF); e != nil {
				p.ErrorCode, p.ErrorMessage = e.code, kmsg.StringPtr(e.msg)
				b.log.Info("partition reassignment refused", "topic", rt.Topic, "partition", rp.Partition,
					"replicas", rp.Replicas, "code", kerr.ErrorForCode(e.code), "reason", e.msg)
			} else {
				done++
			}
			total++
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	b.log.Info("altered partition reassignments", "done", done, "of", total)
	return resp
}

// reassign stores (or with replicas nil cancels) one partition's
// reassignment.
func (b *Broker) reassign(topic string, p int32, replicas []int32, allowRF bool) *reassignmentError {
	unit, ok := b.unitOf(topic, p)
	if !ok {
		return &reassignmentError{kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("Unable to find partition %s:%d.", topic, p)}
	}
	v, members := b.clusterView()
	if replicas == nil {
		r, ok := v.Reassignments[unit]
		if !ok || b.currentOwner(v, unit) == r.Broker {
			return &reassignmentError{kerr.NoReassignmentInProgress.Code, kerr.NoReassignmentInProgress.Description}
		}
		if err := b.cluster.Session().CancelReassignment(unit); err != nil {
			return &reassignmentError{kerr.RequestTimedOut.Code, "storing the cancellation failed: " + err.Error()}
		}
		return nil
	}
	if e := checkReassignment(replicas, members, allowRF); e != nil {
		return e
	}
	if b.cluster == nil {
		return nil // to this broker, which owns it already
	}
	if err := b.cluster.Session().Reassign(unit, replicas[0]); err != nil {
		return &reassignmentError{kerr.RequestTimedOut.Code, "storing the reassignment failed: " + err.Error()}
	}
	b.log.Info("partition reassigned", "topic", topic, "partition", p, "unit", unit, "broker", replicas[0])
	return nil
}

func failAlterPartitionReassignments(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode = code
	for _, rt := range req.Topics {
		t := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
