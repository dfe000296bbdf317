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
	register(api{key: 15, min: 0, max: 6, serve: serveDescribeGroups, fail: failDescribeGroups})
}

// serveDescribeGroups serves DescribeGroups (key 15), versions 0–6.
//
// One answer per group asked (Apache's handleDescribeGroup): state,
// protocol type, the chosen protocol and members; member metadata and
// assignments only for a Stable group. A group that does not exist is
// answered as Dead with no error, and from v6 (KIP-1043) as Dead with
// GROUP_ID_NOT_FOUND and Apache's message. v3+ may ask for the authorized
// operations: without an authorizer that is every group operation (READ,
// DELETE, DESCRIBE); v4+ show group.instance.id.
//
// With --authorizer: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED);
// the authorized-operations bit field comes from the authorizer.
func serveDescribeGroups(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	a := b.sec.Access(c)
	g := newGather(func() { c.Reply(resp) })
	for i, id := range req.Groups {
		out := &resp.Groups[i]
		*out = kmsg.NewDescribeGroupsResponseGroup()
		out.Group = id
		if !a.Group(acl.Describe, id) {
			out.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if out.ErrorCode = b.groupStatus(id, true); out.ErrorCode != 0 {
			continue
		}
		if req.IncludeAuthorizedOperations {
			out.AuthorizedOperations = a.Operations(acl.Group, id)
		}
		g.add()
		msg := &messages.DescribeGroup{Reply: func(d consumergroup.Description) {
			fillDescribedGroup(out, d)
			if out.State == consumergroup.Dead.String() {
				groupNotFound(out, req.Version)
			}
			g.done()
		}}
		if b.sendToGroup(id, false, msg) != routed {
			out.State = consumergroup.Dead.String()
			groupNotFound(out, req.Version)
			g.done()
		}
	}
	g.done()
	return nil
}

// groupNotFound marks a group that does not exist, as v6+ answer it.
func groupNotFound(out *kmsg.DescribeGroupsResponseGroup, version int16) {
	if version >= 6 {
		out.ErrorCode = kerr.GroupIDNotFound.Code
		out.ErrorMessage = kmsg.StringPtr("Group " + out.Group + " not found.")
	}
}

func fillDescribedGroup(out *kmsg.DescribeGroupsResponseGroup, d consumergroup.Description) {
	out.State, out.ProtocolType, out.Protocol = d.State, d.ProtocolType, d.Protocol
	for _, m := range d.Members {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID, rm.InstanceID, rm.ClientID, rm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
		rm.ProtocolMetadata, rm.MemberAssignment = m.Metadata, m.Assignment
		out.Members = append(out.Members, rm)
	}
}

func failDescribeGroups(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.ErrorCode = id, code
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
