package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/storage/partlog"
)

func init() {
	register(api{key: 23, min: 0, max: 4, serve: serveOffsetForLeaderEpoch, fail: failOffsetForLeaderEpoch})
}

// serveOffsetForLeaderEpoch serves OffsetForLeaderEpoch (key 23), versions
// 0–4.
//
// Behavior (Apache's KafkaApis.handleOffsetForLeaderEpochRequest and
// ReplicaManager.lastOffsetForLeaderEpoch):
//   - Per partition: the largest leader epoch at or below the requested
//     one that wrote to the log, and where it ended — the start offset of
//     the next epoch, or the log end offset when the requested epoch is
//     the latest (LeaderEpochFileCache.endOffsetFor). An undefined
//     requested epoch (-1), one above every epoch known, or an empty
//     cache is LeaderEpoch -1, EndOffset -1 (UNDEFINED_EPOCH_OFFSET) with
//     no error. An epoch below every known epoch answers the requested
//     epoch and the first known epoch's start offset (the data before it
//     is gone), as Apache does.
//   - A consumer (KIP-320) asks with the epoch of the last record it read
//     after its leader changed: an end offset below its position means the
//     log was cut under it.
//   - Errors: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not
//     exist; NOT_LEADER_OR_FOLLOWER for one led by a peer broker;
//     CurrentLeaderEpoch (v2+) older than the leader's
//     FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (-1 is not
//     checked); KAFKA_STORAGE_ERROR for a partition offline after a disk
//     error.
//   - ReplicaId (v3+) changes nothing here, as in Apache (followers and
//     consumers get the same answer).
//   - With --authorizer: CLUSTER_ACTION on the cluster allows every topic
//     (not logged when denied); otherwise DESCRIBE on each topic
//     (TOPIC_AUTHORIZATION_FAILED). As Apache, the authorized topics are
//     answered first, then the unauthorized ones.
//   - Answered from the partitions' published read views (the epoch cache
//     and the log end travel with each view): no actor round trip, no
//     disk.
//
// Version notes:
//   - v1: LeaderEpoch in the response.
//   - v2: CurrentLeaderEpoch (fencing), ThrottleMillis.
//   - v3: ReplicaId.
//   - v4: flexible versions.
//   - Apache 4.0 removed v0–1 (KIP-896); they are still served here.
func serveOffsetForLeaderEpoch(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	a := b.sec.Access(c)
	var described map[string]bool
	if !a.Visible(acl.ClusterAction, acl.Cluster, acl.ClusterName) {
		described = a.Topics(acl.Describe, auth.NamesOf(req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic }))
	}
	var denied []kmsg.OffsetForLeaderEpochResponseTopic
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		ok := auth.AllowedIn(described, rt.Topic)
		for _, rp := range rt.Partitions {
			if !ok {
				t.Partitions = append(t.Partitions, epochEndError(rp.Partition, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			t.Partitions = append(t.Partitions, b.epochEnd(rt.Topic, rp))
		}
		if ok {
			resp.Topics = append(resp.Topics, t)
		} else {
			denied = append(denied, t)
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp
}

// epochEnd answers one partition.
func (b *Broker) epochEnd(topic string, rp kmsg.OffsetForLeaderEpochRequestTopicPartition) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	if it := internalByName(topic); isOffsetsTopic(it) && it.hasPartition(rp.Partition) {
		// One epoch, 0, ending at the view's end (topic_consumer_offsets.go).
		v, code := b.offsetsTopicView(rp.Partition)
		if code != 0 {
			return epochEndError(rp.Partition, code)
		}
		_, hw, _ := viewOffsets(v)
		return epochEndFrom(rp, partlog.Epochs{{Epoch: 0, StartOffset: 0}}, hw)
	}
	if it := internalByName(topic); it != nil && it.hasPartition(rp.Partition) {
		// Always empty (topic_internal.go), led at epoch 0 from offset 0.
		return epochEndFrom(rp, partlog.Epochs{{Epoch: 0, StartOffset: 0}}, 0)
	}
	v, code := b.leaderView(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if v == nil {
		return epochEndError(rp.Partition, code)
	}
	return epochEndFrom(rp, v.Epochs, v.EndOffset)
}

func epochEndFrom(rp kmsg.OffsetForLeaderEpochRequestTopicPartition, epochs partlog.Epochs, logEnd int64) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	p.Partition = rp.Partition
	p.LeaderEpoch, p.EndOffset = epochs.EndOffsetFor(rp.LeaderEpoch, logEnd)
	return p
}

func epochEndError(partition int32, code int16) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	p.Partition, p.ErrorCode = partition, code
	p.LeaderEpoch, p.EndOffset = partlog.UndefinedEpoch, partlog.UndefinedEpochOffset
	return p
}

func failOffsetForLeaderEpoch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			t.Partitions = append(t.Partitions, epochEndError(rp.Partition, code))
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
