package broker

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sharegroup"
)

func init() {
	register(api{key: 76, min: 0, max: 1, serve: serveShareGroupHeartbeat, fail: failShareGroupHeartbeat})
}

// serveShareGroupHeartbeat serves ShareGroupHeartbeat (key 76), versions
// 0–1 (KIP-932; v1 changes nothing on the wire, Apache 4.1+ advertises it
// for the GA protocol).
//
// A member joins with epoch 0 and its subscription, heartbeats with its
// epoch (or the one before, if an answer was lost) and leaves with -1;
// the answer carries the member's epoch and, when it changed or the
// request was a full one, its assignment from the simple assignor
// (state/sharegroup). Checked as Apache's
// throwIfShareGroupHeartbeatRequestIsInvalid first (INVALID_REQUEST with
// its message); an unknown member is UNKNOWN_MEMBER_ID, a stale epoch
// FENCED_MEMBER_EPOCH, a group that is not there (or is a consumer or
// classic group) GROUP_ID_NOT_FOUND. With the authorizer: READ on the
// group, DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED).
// In a cluster, served by the owner of the group's offsets slot
// (NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it opens
// it), as consumer groups.
func serveShareGroupHeartbeat(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ShareGroupHeartbeatRequest)
	fail := func(code int16, msg string) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	r := sharegroup.HeartbeatRequest{Group: req.GroupID, MemberID: req.MemberID, Epoch: req.MemberEpoch, Rack: req.RackID,
		Subscribed: req.SubscribedTopicNames, ClientID: c.ClientID, ClientHost: clientHost(c.Remote)}
	if code, msg := sharegroup.Validate(r); code != 0 {
		b.log.Info("ShareGroupHeartbeat refused", "group", req.GroupID, "member", req.MemberID, "client", c.ClientID, "reason", msg)
		return fail(code, msg)
	}
	a := b.sec.Access(c)
	if !a.Group(acl.Read, req.GroupID) {
		return fail(kerr.GroupAuthorizationFailed.Code, "")
	}
	for _, t := range req.SubscribedTopicNames {
		if !a.Topic(acl.Describe, t) {
			return fail(kerr.TopicAuthorizationFailed.Code, "")
		}
	}
	if code := b.groupSlotStatus(req.GroupID); code != 0 {
		return fail(code, "")
	}
	if b.isOtherGroupType(req.GroupID) {
		return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", req.GroupID))
	}
	b.shares.Send(&messages.ShareHeartbeat{Request: r, Reply: func(res sharegroup.HeartbeatResult) {
		c.Reply(shareHeartbeatResponse(req, res))
	}})
	return nil
}

// isOtherGroupType says whether id names a classic or consumer group
// (Apache keeps one group type per id).
func (b *Broker) isOtherGroupType(id string) bool {
	for _, h := range b.liveGroups() {
		if h.ID == id {
			return true
		}
	}
	return false
}

func shareHeartbeatResponse(req *kmsg.ShareGroupHeartbeatRequest, res sharegroup.HeartbeatResult) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = res.Code
	if res.Message != "" {
		resp.ErrorMessage = &res.Message
	}
	if res.Code != 0 {
		return resp
	}
	id := res.MemberID
	resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis = &id, res.Epoch, int32(res.Interval.Milliseconds())
	if res.HasAssignment {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		ids := make([]sharegroup.TopicID, 0, len(res.Assignment))
		for tid := range res.Assignment {
			ids = append(ids, tid)
		}
		slices.SortFunc(ids, func(x, y sharegroup.TopicID) int { return slices.Compare(x[:], y[:]) })
		for _, tid := range ids {
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = tid, slices.Clone(res.Assignment[tid])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = &a
	}
	return resp
}

func failShareGroupHeartbeat(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
