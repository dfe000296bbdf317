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
// tombstones are durable, as Apache's coordinator runtime completes it
// once its records are committed, so a deleted group stays deleted across
// a crash; the connection is held meanwhile. If they cannot be made
// durable the group answers NOT_COORDINATOR and is kept as it was.
//
// With --authorizer: DELETE on each group (GROUP_AUTHORIZATION_FAILED).
//
// In a cluster a share group's state is also with the partitions other
// brokers own: once the coordinator has deleted what it keeps (checking
// the group has no members), or keeps nothing of a group it does not
// know, it sends the delete to every peer over the peer channel, each
// deleting the share state it keeps (peerDeleteShareGroups). The group
// is deleted if any broker had it; a peer that cannot be asked makes it
// COORDINATOR_NOT_AVAILABLE unless every broker answered.
func serveDeleteGroups(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if b.cluster != nil && b.sec.IsPeer(c) {
		return b.peerDeleteShareGroups(c, req, resp)
	}
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
				b.deleteShareGroupOnPeers(out, g.done)
			}})
			continue
		}
		msg := &messages.DeleteGroup{Reply: func(code int16) {
			out.ErrorCode = code
			g.done()
		}}
		if b.sendToGroup(out.Group, false, msg) != routed {
			// No group here: in a cluster, an empty share group whose
			// state is all with other brokers' partitions.
			out.ErrorCode = kerr.GroupIDNotFound.Code
			b.deleteShareGroupOnPeers(out, g.done)
		}
	}
	g.done()
	return nil
}

// deleteShareGroupOnPeers finishes a share group's delete on the peers
// once the coordinator's own step answered out (0 or GROUP_ID_NOT_FOUND;
// anything else, NON_EMPTY_GROUP first, ends it here), then calls done.
func (b *Broker) deleteShareGroupOnPeers(out *kmsg.DeleteGroupsResponseGroup, done func()) {
	if b.cluster == nil || b.peers == nil || b.shares == nil ||
		(out.ErrorCode != 0 && out.ErrorCode != kerr.GroupIDNotFound.Code) {
		done()
		return
	}
	go func() {
		defer done()
		peers := b.askPeers(func() kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{out.Group}
			return r
		})
		for _, r := range peers.got {
			theirs, ok := r.(*kmsg.DeleteGroupsResponse)
			if !ok || len(theirs.Groups) != 1 {
				continue
			}
			switch code := theirs.Groups[0].ErrorCode; {
			case code == kerr.GroupIDNotFound.Code:
			case code == 0 && out.ErrorCode == kerr.GroupIDNotFound.Code:
				out.ErrorCode = 0
			case code != 0:
				out.ErrorCode = code // its share state there is not deleted
			}
		}
		if len(peers.failed) > 0 && out.ErrorCode == kerr.GroupIDNotFound.Code {
			// Only the peers that did not answer may keep the group.
			out.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
	}()
}

// peerDeleteShareGroups answers a coordinator's DeleteGroups sent over the
// peer channel (deleteShareGroupOnPeers): the share state this broker
// keeps of each group, deleted and fsynced, or GROUP_ID_NOT_FOUND; the
// coordinator did the authorization and the members check.
func (b *Broker) peerDeleteShareGroups(c *server.Call, req *kmsg.DeleteGroupsRequest, resp *kmsg.DeleteGroupsResponse) kmsg.Response {
	known := map[string]bool{}
	if b.shares != nil {
		for _, l := range b.shares.Groups() {
			known[l.ID] = true
		}
	}
	release := c.Hold()
	g := newGather(func() {
		c.Reply(resp)
		release()
	})
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	for i, id := range req.Groups {
		out := &resp.Groups[i]
		*out = kmsg.NewDeleteGroupsResponseGroup()
		out.Group, out.ErrorCode = id, kerr.GroupIDNotFound.Code
		if !known[id] {
			continue
		}
		g.add()
		b.shares.Send(&messages.ShareDeleteGroup{Group: id, Reply: func(code int16) {
			out.ErrorCode = code
			g.done()
		}})
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
