package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 42, min: 0, max: 3, serve: serveDeleteGroups, fail: failDeleteGroups})
}

// serveDeleteGroups serves DeleteGroups (key 42), versions 0–3 (v3 is
// encoded as v2 and answered the same).
//
// Deletes Empty groups and all their offsets (Apache's handleDeleteGroups):
// NON_EMPTY_GROUP while the group has members, GROUP_ID_NOT_FOUND if it
// does not exist. A share group is deleted by the share coordinator, as
// Apache's: only when it has no members (NON_EMPTY_GROUP), and with its
// share state (every share-partition's, fsynced before the answer).
// Group ids are deduplicated. The answer waits until the
// tombstones are durable (Apache does not wait), so a deleted group stays
// deleted across a crash; the connection is held meanwhile.
//
// With --authorizer: DELETE on each group (GROUP_AUTHORIZATION_FAILED).
func serveDeleteGroups(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	seen := map[string]bool{}
	for _, id := range req.Groups {
		if seen[id] {
			continue
		}
		seen[id] = true
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		resp.Groups = append(resp.Groups, g)
	}
	a := b.sec.Access(c)
	release := c.Hold()
	g := newGather(func() {
		c.Reply(resp)
		release()
	})
	for i := range resp.Groups {
		out := &resp.Groups[i]
		if !a.Group(acl.Delete, out.Group) {
			out.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if out.ErrorCode = b.groupStatus(out.Group, true); out.ErrorCode != 0 {
			continue
		}
		g.add()
		if b.isShareGroup(out.Group) {
			b.shares.Send(&messages.ShareDeleteGroup{Group: out.Group, Reply: func(code int16) {
				out.ErrorCode = code
				g.done()
			}})
			continue
		}
		msg := &messages.DeleteGroup{Reply: func(code int16) {
			out.ErrorCode = code
			g.done()
		}}
		if b.sendToGroup(out.Group, false, msg) != routed {
			out.ErrorCode = kerr.GroupIDNotFound.Code
			g.done()
		}
	}
	g.done()
	return nil
}

func failDeleteGroups(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = id, code
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
