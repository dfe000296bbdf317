package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 37, min: 0, max: 3, blocking: true, serve: serveCreatePartitions, fail: failCreatePartitions})
}

// serveCreatePartitions serves CreatePartitions (key 37), versions 0–3.
//
// Grows a topic to Count partitions; shrinking or an equal count is
// INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a topic
// named twice INVALID_REQUEST, assignments naming another broker
// INVALID_REPLICA_ASSIGNMENT. validate_only creates nothing. A topic's new
// partitions are added all or nothing, as Apache's controller commits them
// in one atomic batch: if one cannot be opened (a disk error) the topic
// answers UNKNOWN_SERVER_ERROR and keeps its old count, on disk too; the
// other topics of the request are unaffected. Blocking.
//
// With --authorizer: ALTER on each topic (TOPIC_AUTHORIZATION_FAILED).
func serveCreatePartitions(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	a := b.sec.Access(c)
	mq := b.mutationQuota(c, 3)
	defer mq.finish()
	for _, rt := range req.Topics {
		out := kmsg.NewCreatePartitionsResponseTopic()
		out.Topic = rt.Topic
		switch {
		case seen[rt.Topic] > 1:
			out.ErrorCode = kerr.InvalidRequest.Code
			out.ErrorMessage = kmsg.StringPtr("duplicate topic in the request")
		case !a.Topic(acl.Alter, rt.Topic):
			out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			out.ErrorMessage = kmsg.StringPtr("The topic authorization is failed.")
		case !createPartitionsAssignmentOK(rt.Assignment, b.cfg.BrokerID):
			out.ErrorCode = kerr.InvalidReplicaAssignment.Code
			out.ErrorMessage = kmsg.StringPtr("replica assignments may only name this broker")
		case !mq.record(b.partitionsAdded(rt.Topic, rt.Count)):
			out.ErrorCode, out.ErrorMessage = kerr.ThrottlingQuotaExceeded.Code, kmsg.StringPtr(kerr.ThrottlingQuotaExceeded.Description)
		default:
			if err := b.growTopic(rt.Topic, rt.Count, req.ValidateOnly); err != nil {
				out.ErrorCode, out.ErrorMessage = b.errCode(err)
			}
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

func createPartitionsAssignmentOK(as []kmsg.CreatePartitionsRequestTopicAssignment, id int32) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != id {
			return false
		}
	}
	return true
}

func failCreatePartitions(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic, t.ErrorCode = rt.Topic, code
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
