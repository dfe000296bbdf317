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
	register(api{key: 13, min: 0, max: 5, serve: serveLeaveGroup, fail: failLeaveGroup})
}

// serveLeaveGroup serves LeaveGroup (key 13), versions 0–5.
//
// Removes members (Apache's handleLeaveGroup): v0–2 name one member by
// member id and answer one error code; v3+ batch members, by member id or
// by group.instance.id alone (admin removal), with one result per member
// and a top-level code for group-level errors. A group that does not exist
// answers UNKNOWN_MEMBER_ID per member; a share group's id is
// GROUP_ID_NOT_FOUND (not a classic group). v5 adds a reason per member.
//
// With --authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED).
func serveLeaveGroup(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.LeaveGroupRequest)
	members := []consumergroup.LeaveMember{{MemberID: req.MemberID}}
	if req.Version >= 3 {
		members = members[:0]
		for _, m := range req.Members {
			members = append(members, consumergroup.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID, Reason: m.Reason})
		}
	}
	if !b.sec.Access(c).Group(acl.Read, req.Group) {
		return leaveGroupResponse(req, kerr.GroupAuthorizationFailed.Code, nil)
	}
	if code := b.groupStatus(req.Group, false); code != 0 {
		return leaveGroupResponse(req, code, nil)
	}
	if b.isShareGroup(req.Group) {
		return leaveGroupResponse(req, kerr.GroupIDNotFound.Code, nil) // not a classic group, as Apache
	}
	msg := &messages.LeaveGroup{Members: members, Reply: func(code int16, res []consumergroup.LeaveResult) {
		c.Reply(leaveGroupResponse(req, code, res))
	}}
	switch b.sendToGroup(req.Group, false, msg) {
	case groupAbsent:
		res := make([]consumergroup.LeaveResult, len(members))
		for i, m := range members {
			res[i] = consumergroup.LeaveResult{MemberID: m.MemberID, InstanceID: m.InstanceID, Err: kerr.UnknownMemberID.Code}
		}
		return leaveGroupResponse(req, 0, res)
	case groupDying:
		return leaveGroupResponse(req, kerr.CoordinatorNotAvailable.Code, nil)
	}
	return nil
}

func leaveGroupResponse(req *kmsg.LeaveGroupRequest, code int16, res []consumergroup.LeaveResult) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if req.Version < 3 {
		// One member, one code: the group's, else the member's.
		resp.ErrorCode = code
		if code == 0 && len(res) > 0 {
			resp.ErrorCode = res[0].Err
		}
		return resp
	}
	resp.ErrorCode = code
	for _, r := range res {
		m := kmsg.NewLeaveGroupResponseMember()
		m.MemberID, m.InstanceID, m.ErrorCode = r.MemberID, r.InstanceID, r.Err
		resp.Members = append(resp.Members, m)
	}
	return resp
}

func failLeaveGroup(r kmsg.Request, code int16) kmsg.Response {
	return leaveGroupResponse(r.(*kmsg.LeaveGroupRequest), code, nil)
}
