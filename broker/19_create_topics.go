package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 19, min: 0, max: 7, blocking: true, serve: serveCreateTopics, fail: failCreateTopics})
}

// serveCreateTopics serves CreateTopics (key 19), versions 0–7 (v0–1 as
// Kafka 3.7 still serves them: v1 adds validate_only, v2 error messages).
//
// Per-topic errors as Apache: invalid names → INVALID_TOPIC_EXCEPTION,
// bad partition counts → INVALID_PARTITIONS, replication factor above 1 →
// INVALID_REPLICATION_FACTOR (one broker), unknown or invalid configs
// (including cleanup.policy=compact, not supported yet) → INVALID_CONFIG,
// existing topics → TOPIC_ALREADY_EXISTS, a name given twice →
// INVALID_REQUEST. Manual replica assignments must name only this broker.
// validate_only checks everything and creates nothing. From v5 the answer
// carries the partition count, replication factor and every effective
// config with its source, sorted by name (as Apache's controller); from v7
// the topic id. Blocking: creation persists metadata and opens partitions.
//
// With --authorizer: CREATE on the cluster or the topic
// (TOPIC_AUTHORIZATION_FAILED); without DESCRIBE_CONFIGS on it the configs
// are left out (TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED).
func serveCreateTopics(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	a := b.sec.Access(c)
	clusterCreate := a.Visible(acl.Create, acl.Cluster, acl.ClusterName)
	mq := b.mutationQuota(c, 6)
	defer mq.finish()
	for _, rt := range req.Topics {
		out := kmsg.NewCreateTopicsResponseTopic()
		out.Topic = rt.Topic
		out.NumPartitions, out.ReplicationFactor = -1, -1
		if seen[rt.Topic] > 1 {
			out.ErrorCode = kerr.InvalidRequest.Code
			out.ErrorMessage = kmsg.StringPtr("create topics request contains the topic more than once")
			resp.Topics = append(resp.Topics, out)
			continue
		}
		if !clusterCreate && !a.Topic(acl.Create, rt.Topic) {
			out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			out.ErrorMessage = kmsg.StringPtr("Authorization failed.")
			resp.Topics = append(resp.Topics, out)
			continue
		}
		describeConfigs := a.Visible(acl.DescribeConfigs, acl.Topic, rt.Topic)
		configs := map[string]string{}
		for _, cfg := range rt.Configs {
			if cfg.Value != nil {
				configs[cfg.Name] = *cfg.Value
			}
		}
		partitions, replication := rt.NumPartitions, rt.ReplicationFactor
		if len(rt.ReplicaAssignment) > 0 {
			if partitions != -1 || replication != -1 {
				out.ErrorCode = kerr.InvalidRequest.Code
				out.ErrorMessage = kmsg.StringPtr("both partition count and replica assignment were given")
				resp.Topics = append(resp.Topics, out)
				continue
			}
			partitions, replication = int32(len(rt.ReplicaAssignment)), int16(len(rt.ReplicaAssignment[0].Replicas))
			if !assignmentIsThisBroker(rt.ReplicaAssignment, b.cfg.BrokerID) {
				out.ErrorCode = kerr.InvalidReplicaAssignment.Code
				out.ErrorMessage = kmsg.StringPtr("replica assignments may only name this broker")
				resp.Topics = append(resp.Topics, out)
				continue
			}
		}
		if !mq.record(int(max(partitions, b.cfg.DefaultPartitions))) {
			out.ErrorCode, out.ErrorMessage = kerr.ThrottlingQuotaExceeded.Code, kmsg.StringPtr(kerr.ThrottlingQuotaExceeded.Description)
			resp.Topics = append(resp.Topics, out)
			continue
		}
		t, err := b.createTopic(rt.Topic, partitions, replication, configs, req.ValidateOnly)
		if err != nil {
			out.ErrorCode, out.ErrorMessage = b.errCode(err)
			if out.ErrorCode == kerr.UnknownServerError.Code {
				b.log.Error("create topic failed", "topic", rt.Topic, "err", err)
			} else {
				b.log.Info("CreateTopics rejected", "topic", rt.Topic, "error", kerr.ErrorForCode(out.ErrorCode), "message", err.Error(), "remote", c.Remote)
			}
			resp.Topics = append(resp.Topics, out)
			continue
		}
		out.TopicID = t.meta.ID
		out.NumPartitions, out.ReplicationFactor = t.meta.Partitions, 1
		if !describeConfigs {
			out.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, out)
			continue
		}
		for _, e := range b.topicConfigEntries(t.meta.Configs, nil) {
			cfg := kmsg.NewCreateTopicsResponseTopicConfig()
			cfg.Name, cfg.Value, cfg.ReadOnly, cfg.Source = e.name, e.value, e.readOnly, int8(e.source)
			out.Configs = append(out.Configs, cfg)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

func assignmentIsThisBroker(as []kmsg.CreateTopicsRequestTopicReplicaAssignment, id int32) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != id {
			return false
		}
	}
	return true
}

func failCreateTopics(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, code
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
