package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/consumergroup"
)

func init() {
	register(api{key: 12, min: 0, max: 4, serve: serveHeartbeat, fail: failHeartbeat})
}

// serveHeartbeat serves Heartbeat (key 12), versions 0–4.
//
// Keeps a member's session alive (Apache's handleHeartbeat): an empty
// group id is INVALID_GROUP_ID, a group that does not exist
// UNKNOWN_MEMBER_ID, a share group's id GROUP_ID_NOT_FOUND (not a classic
// group); inside the group ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (v3+ group.instance.id) and
// REBALANCE_IN_PROGRESS tell the member to rejoin.
//
// With --authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED).
func serveHeartbeat(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !b.sec.Access(c).Group(acl.Read, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	if resp.ErrorCode = b.groupStatus(req.Group, false); resp.ErrorCode != 0 {
		return resp
	}
	if b.isShareGroup(req.Group) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code // not a classic group, as Apache
		return resp
	}
	msg := &messages.Heartbeat{
		Request: consumergroup.HeartbeatRequest{MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation},
		Reply:   func(code int16) { resp.ErrorCode = code; c.Reply(resp) },
	}
	switch b.sendToGroup(req.Group, false, msg) {
	case groupAbsent:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	case groupDying:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	return nil
}

func failHeartbeat(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = code
	return resp
}
