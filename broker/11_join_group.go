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
	register(api{key: 11, min: 0, max: 9, serve: serveJoinGroup, fail: failJoinGroup})
}

// serveJoinGroup serves JoinGroup (key 11), versions 0–9.
//
// Apache's handleJoinGroup: an empty group id is INVALID_GROUP_ID, a
// session timeout outside group.min/max.session.timeout.ms
// INVALID_SESSION_TIMEOUT (both before any group is created); an unknown
// member id creates the group, a known one for a group that does not exist
// is UNKNOWN_MEMBER_ID. The answer is parked in the group actor until the
// rebalance's join phase ends. Version notes: v0 has no rebalance timeout
// (the session timeout is used); v4+ without an instance id first answers
// MEMBER_ID_REQUIRED with a member id (KIP-394); v5+ carries
// group.instance.id (KIP-345); ProtocolType/ProtocolName are nullable from
// v7 (null for an error) and "" before; v9 adds SkipAssignment for a static
// leader rejoining a Stable group.
//
// With --authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED).
func serveJoinGroup(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.JoinGroupRequest)
	fail := func(code int16) kmsg.Response {
		return joinGroupResponse(req, consumergroup.JoinResult{Err: code, MemberID: req.MemberID, Generation: -1})
	}
	if !b.sec.Access(c).Group(acl.Read, req.Group) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	if code := b.groupStatus(req.Group, false); code != 0 {
		return fail(code)
	}
	if b.isShareGroup(req.Group) {
		return fail(kerr.GroupIDNotFound.Code) // one group type per id, as Apache
	}
	gcfg := b.groupConfig()
	if !gcfg.ValidSessionTimeout(req.SessionTimeoutMillis) {
		b.log.Info("JoinGroup with a session timeout out of bounds", "group", req.Group, "session_timeout_ms", req.SessionTimeoutMillis,
			"min", gcfg.MinSessionTimeout, "max", gcfg.MaxSessionTimeout, "client", c.ClientID)
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	r := consumergroup.JoinRequest{
		MemberID: req.MemberID, InstanceID: req.InstanceID, ProtocolType: req.ProtocolType,
		SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		ClientID: c.ClientID, ClientHost: clientHost(c.Remote),
		RequireKnownMemberID:  req.Version >= 4 && req.InstanceID == nil,
		SupportSkipAssignment: req.Version >= 9,
		Reason:                "not provided",
	}
	if req.Version == 0 {
		r.RebalanceTimeoutMs = req.SessionTimeoutMillis
	}
	if req.Reason != nil && *req.Reason != "" {
		r.Reason = *req.Reason
	}
	for _, p := range req.Protocols {
		r.Protocols = append(r.Protocols, consumergroup.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	msg := &messages.JoinGroup{Request: r, Reply: func(res consumergroup.JoinResult) { c.Reply(joinGroupResponse(req, res)) }}
	switch b.sendToGroup(req.Group, req.MemberID == "", msg) {
	case groupAbsent:
		return fail(kerr.UnknownMemberID.Code)
	case groupDying:
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	return nil
}

func joinGroupResponse(req *kmsg.JoinGroupRequest, res consumergroup.JoinResult) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.MemberID, resp.LeaderID = res.Err, res.Generation, res.MemberID, res.Leader
	resp.ProtocolType, resp.Protocol, resp.SkipAssignment = res.ProtocolType, res.ProtocolName, res.SkipAssignment
	if req.Version < 7 {
		// Not nullable before v7: "" stands for none.
		if resp.Protocol == nil {
			resp.Protocol = kmsg.StringPtr("")
		}
	} else if resp.Protocol != nil && *resp.Protocol == "" {
		resp.Protocol = nil
	}
	for _, m := range res.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func failJoinGroup(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.JoinGroupRequest)
	return joinGroupResponse(req, consumergroup.JoinResult{Err: code, Generation: -1})
}
