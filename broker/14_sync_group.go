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
	register(api{key: 14, min: 0, max: 5, serve: serveSyncGroup, fail: failSyncGroup})
}

// serveSyncGroup serves SyncGroup (key 14), versions 0–5.
//
// Apache's handleSyncGroup: v5+ must name the protocol type and name, else
// INCONSISTENT_GROUP_PROTOCOL; an empty group id is INVALID_GROUP_ID; a
// group that does not exist is UNKNOWN_MEMBER_ID, a share group's id
// GROUP_ID_NOT_FOUND (not a classic group). Followers are parked in
// the group actor until the leader's assignment is durable in the offsets
// log; the leader's answer comes at the same moment. v3+ carries
// group.instance.id; v5+ answers the protocol type and name.
//
// With --authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED).
func serveSyncGroup(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.SyncGroupRequest)
	fail := func(code int16) kmsg.Response { return syncGroupResponse(req, consumergroup.SyncResult{Err: code}) }
	if req.Version >= 5 && (req.ProtocolType == nil || req.Protocol == nil) {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	if !b.sec.Access(c).Group(acl.Read, req.Group) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	if code := b.groupStatus(req.Group, false); code != 0 {
		return fail(code)
	}
	if b.isShareGroup(req.Group) {
		return fail(kerr.GroupIDNotFound.Code) // not a classic group, as Apache
	}
	r := consumergroup.SyncRequest{
		MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation,
		ProtocolType: req.ProtocolType, ProtocolName: req.Protocol,
		Assignments: make(map[string][]byte, len(req.GroupAssignment)),
	}
	for _, a := range req.GroupAssignment {
		r.Assignments[a.MemberID] = a.MemberAssignment
	}
	msg := &messages.SyncGroup{Request: r, Reply: func(res consumergroup.SyncResult) { c.Reply(syncGroupResponse(req, res)) }}
	switch b.sendToGroup(req.Group, false, msg) {
	case groupAbsent:
		return fail(kerr.UnknownMemberID.Code)
	case groupDying:
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	return nil
}

func syncGroupResponse(req *kmsg.SyncGroupRequest, res consumergroup.SyncResult) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode, resp.ProtocolType, resp.Protocol = res.Err, res.ProtocolType, res.ProtocolName
	resp.MemberAssignment = res.Assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

func failSyncGroup(r kmsg.Request, code int16) kmsg.Response {
	return syncGroupResponse(r.(*kmsg.SyncGroupRequest), consumergroup.SyncResult{Err: code})
}
