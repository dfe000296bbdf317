package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/ownership"
)

func init() {
	register(api{key: 46, min: 0, max: 0, serve: serveListPartitionReassignments, fail: failListPartitionReassignments})
}

// ongoingReassignment is one partition still moving.
type ongoingReassignment struct {
	topic     string
	partition int32
	target    int32
	current   int32 // -1: between owners
}

// ongoingReassignments lists the reassignments in progress, by topic and
// partition.
func (b *Broker) ongoingReassignments() []ongoingReassignment {
	v, _ := b.clusterView()
	var out []ongoingReassignment
	for unit, r := range v.Reassignments {
		topic, p, ok := ownership.ParsePartitionUnit(unit)
		if !ok {
			continue
		}
		if cur := b.currentOwner(v, unit); cur != r.Broker {
			out = append(out, ongoingReassignment{topic, p, r.Broker, cur})
		}
	}
	for _, it := range sortedInternalTopics() {
		for p := int32(0); p < it.partitions; p++ {
			unit, _ := internalSlotUnit(it.name, p)
			if r, ok := v.Reassignments[unit]; ok && b.currentOwner(v, unit) != r.Broker {
				out = append(out, ongoingReassignment{it.name, p, r.Broker, b.currentOwner(v, unit)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

// serveListPartitionReassignments serves ListPartitionReassignments (key
// 46), version 0.
//
// The reassignments still moving a partition: stored (45) to a broker
// that does not own the partition yet (its hand-off is under way, or the
// broker is not alive and it waits for it). As Apache lists one in
// progress: replicas are the target followed by the current owner, adding
// the target, removing the current owner. A null topic list lists every
// one; named partitions with none are left out, unknown topics too, as
// Apache's controller does. A single broker has none.
//
// ACL: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
func serveListPartitionReassignments(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListPartitionReassignmentsRequest)
	if !b.sec.Access(c).Cluster(acl.Describe) {
		return failListPartitionReassignments(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	asked := partitionSet(req.Topics, func(t *kmsg.ListPartitionReassignmentsRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
	for _, o := range b.ongoingReassignments() {
		if asked != nil && !asked[o.topic][o.partition] {
			continue
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != o.topic {
			t := kmsg.NewListPartitionReassignmentsResponseTopic()
			t.Topic = o.topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		p.Partition = o.partition
		p.Replicas, p.AddingReplicas, p.RemovingReplicas = []int32{o.target}, []int32{o.target}, []int32{}
		if o.current >= 0 {
			p.Replicas = append(p.Replicas, o.current)
			p.RemovingReplicas = []int32{o.current}
		}
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}

func failListPartitionReassignments(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	resp.ErrorCode = code
	return resp
}
