package broker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/consumergroup"
)

func init() {
	register(api{key: 68, min: 0, max: 1, serve: serveConsumerGroupHeartbeat, fail: failConsumerGroupHeartbeat})
}

// serveConsumerGroupHeartbeat serves ConsumerGroupHeartbeat (key 68),
// versions 0–1 (KIP-848; what kmsg v1.15.1 decodes, as Apache 4.0
// advertises).
//
// The consumer group protocol: members join with epoch 0, heartbeat with
// their epoch, leave with -1 (a static member "for now" with -2); the
// broker computes every member's target assignment with its server-side
// assignor (uniform or range) and hands partitions over only once their
// previous owner has revoked them. The request is checked as Apache's
// GroupCoordinatorService does (INVALID_REQUEST with its message,
// UNSUPPORTED_ASSIGNOR) before any group is looked up; a join may create
// the group, or convert an empty classic group; anything else for a group
// that does not exist is GROUP_ID_NOT_FOUND. The answer leaves once what
// it reports is durable in the group's slot log. Version notes: v1 adds
// SubscribedTopicRegex (RE2 syntax, INVALID_REGULAR_EXPRESSION) and makes
// the client generate its member id (KIP-1082); v0 joins may leave it
// empty for the broker to fill. With the authorizer on: READ on the group
// (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic
// name (TOPIC_AUTHORIZATION_FAILED naming them), as Apache 4.0; a regex
// resolves to the topics the member may describe (KAFKA-18813).
func serveConsumerGroupHeartbeat(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ConsumerGroupHeartbeatRequest)
	fail := func(code int16, msg string) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if code := b.groupSlotStatus(req.Group); code != 0 {
		return fail(code, "")
	}
	a := b.sec.Access(c)
	if !a.Group(acl.Read, req.Group) {
		return fail(kerr.GroupAuthorizationFailed.Code, "")
	}
	if len(req.SubscribedTopicNames) > 0 {
		// Apache 4.0: every named topic must be describable.
		allowed := a.Topics(acl.Describe, slices.Values(req.SubscribedTopicNames))
		var denied []string
		for _, t := range req.SubscribedTopicNames {
			if !auth.AllowedIn(allowed, t) {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			slices.Sort(denied)
			return fail(kerr.TopicAuthorizationFailed.Code, "The following topics are not authorized: "+strings.Join(slices.Compact(denied), ", ")+".")
		}
	}
	r := consumergroup.ConsumerHeartbeatRequest{
		Version: req.Version, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		SubscribedTopicNames: req.SubscribedTopicNames, SubscribedTopicRegex: req.SubscribedTopicRegex,
		ServerAssignor: req.ServerAssignor, ClientID: c.ClientID, ClientHost: clientHost(c.Remote),
	}
	if a.On() {
		r.CanDescribe = func(topic string) bool { return a.Visible(acl.Describe, acl.Topic, topic) }
	}
	if req.Topics != nil {
		r.Owned = make([]consumergroup.OwnedTopic, 0, len(req.Topics))
		for _, t := range req.Topics {
			r.Owned = append(r.Owned, consumergroup.OwnedTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	if code, msg := consumergroup.ValidateConsumerHeartbeat(req.Group, r, b.cfg.ConsumerAssignors); code != 0 {
		b.log.Info("ConsumerGroupHeartbeat refused", "group", req.Group, "member", req.MemberID, "client", c.ClientID, "code", kerr.ErrorForCode(code).Error(), "reason", msg)
		return fail(code, msg)
	}
	if b.isShareGroup(req.Group) {
		return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", req.Group))
	}
	msg := &messages.ConsumerHeartbeat{Request: r, Reply: func(res consumergroup.ConsumerHeartbeatResult) {
		c.Reply(consumerHeartbeatResponse(req, res))
	}}
	switch b.sendToGroup(req.Group, req.MemberEpoch == 0, msg) {
	case groupAbsent:
		return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Consumer group %s not found.", req.Group))
	case groupDying:
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	return nil
}

func consumerHeartbeatResponse(req *kmsg.ConsumerGroupHeartbeatRequest, res consumergroup.ConsumerHeartbeatResult) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode, resp.ErrorMessage = res.Err, res.ErrMessage
	if res.Err != 0 {
		return resp
	}
	resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = res.MemberID, res.MemberEpoch, res.HeartbeatIntervalMs
	if res.HasAssignment {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
		for _, tp := range res.Assignment.Sorted() {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID, t.Partitions = tp.TopicID, tp.Partitions
			a.Topics = append(a.Topics, t)
		}
		resp.Assignment = &a
	}
	return resp
}

func failConsumerGroupHeartbeat(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
