package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/storage/topicstore"
)

func init() {
	register(api{key: 20, min: 0, max: 6, blocking: true, serve: serveDeleteTopics, fail: failDeleteTopics})
}

// serveDeleteTopics serves DeleteTopics (key 20), versions 0–6 (v0 as Kafka
// 3.7 still serves it).
//
// v0–5 name topics in TopicNames; v6 in Topics, by name or by id. Deleting
// stops the topic's partition actors and removes their directories and the
// topic's metadata file. Unknown topics → UNKNOWN_TOPIC_OR_PARTITION (by id:
// UNKNOWN_TOPIC_ID). Blocking: deletion touches the disk.
//
// With --authorizer: DELETE on each topic (TOPIC_AUTHORIZATION_FAILED); a
// topic named by id that the principal may not DESCRIBE comes back without
// its name.
func serveDeleteTopics(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	a := b.sec.Access(c)
	mq := b.mutationQuota(c, 5)
	defer mq.finish()
	for _, rt := range deleteTopicsTargets(req) {
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		} else if t := b.topics.load().byID[topicstore.UUID(rt.TopicID)]; t != nil {
			name = t.meta.Name
			out.Topic = &name
		} else if it := internalByID(topicstore.UUID(rt.TopicID)); it != nil {
			name = it.name
			out.Topic = &name
		} else {
			out.ErrorCode = kerr.UnknownTopicID.Code
			resp.Topics = append(resp.Topics, out)
			continue
		}
		// A topic named by id that the principal may not describe keeps
		// its name to itself (ids are not secret, names are).
		if rt.Topic == nil && !a.Topic(acl.Describe, name) {
			out.Topic, out.ErrorCode = nil, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, out)
			continue
		}
		if !a.Topic(acl.Delete, name) {
			out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, out)
			continue
		}
		if t := b.topics.load().byName[name]; t != nil {
			out.TopicID = t.meta.ID
		} else if it := internalByName(name); it != nil {
			out.TopicID = it.id
		}
		if t := b.topics.load().byName[name]; t != nil && !mq.record(int(t.meta.Partitions)) {
			out.ErrorCode, out.ErrorMessage = kerr.ThrottlingQuotaExceeded.Code, kmsg.StringPtr(kerr.ThrottlingQuotaExceeded.Description)
			resp.Topics = append(resp.Topics, out)
			continue
		}
		if err := b.deleteTopic(name); err != nil {
			out.ErrorCode, out.ErrorMessage = b.errCode(err)
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// deleteTopicsTargets folds v0–5's TopicNames into v6's Topics form.
func deleteTopicsTargets(req *kmsg.DeleteTopicsRequest) []kmsg.DeleteTopicsRequestTopic {
	if req.Version >= 6 {
		return req.Topics
	}
	out := make([]kmsg.DeleteTopicsRequestTopic, 0, len(req.TopicNames))
	for _, n := range req.TopicNames {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		out = append(out, t)
	}
	return out
}

func failDeleteTopics(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, rt := range deleteTopicsTargets(req) {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, code
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
