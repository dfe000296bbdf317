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
	register(api{key: 77, min: 0, max: 1, serve: serveShareGroupDescribe, fail: failShareGroupDescribe})
}

// serveShareGroupDescribe serves ShareGroupDescribe (key 77), versions 0–1
// (KIP-932).
//
// Each group's state (Empty or Stable: a share group never waits for
// revocations), group and assignment epochs, the assignor ("simple") and
// its members with their subscriptions and assignments. A group that is
// not a share group — unknown, or a consumer or classic one — is
// GROUP_ID_NOT_FOUND, as Apache's. With the authorizer: DESCRIBE on each
// group (GROUP_AUTHORIZATION_FAILED). In a cluster, a group whose offsets
// slot another broker owns is NOT_COORDINATOR.
func serveShareGroupDescribe(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ShareGroupDescribeRequest)
	a := b.sec.Access(c)
	var ask []string
	status := map[string]int16{}
	for _, id := range req.GroupIDs {
		if !a.Group(acl.Describe, id) {
			continue
		}
		if status[id] = b.groupSlotStatus(id); status[id] == 0 {
			ask = append(ask, id)
		}
	}
	if ask == nil {
		ask = []string{}
	}
	b.shares.Send(&messages.ShareDescribe{Groups: ask, Reply: func(ds []sharegroup.Description) {
		byID := map[string]sharegroup.Description{}
		for _, d := range ds {
			byID[d.ID] = d
		}
		resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
		for _, id := range req.GroupIDs {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID = id
			g.AuthorizedOperations = -2147483648
			d, ok := byID[id]
			switch {
			case !a.Group(acl.Describe, id):
				g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			case status[id] != 0:
				g.ErrorCode = status[id]
			case !ok || d.State == "Dead":
				g.ErrorCode = kerr.GroupIDNotFound.Code
				msg := fmt.Sprintf("Group %s not found.", id)
				g.ErrorMessage = &msg
			default:
				g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.State, d.Epoch, d.AssignmentEpoch, "simple"
				for _, m := range d.Members {
					rm := kmsg.NewShareGroupDescribeResponseGroupMember()
					rm.MemberID, rm.RackID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.ID, m.Rack, m.Epoch, m.ClientID, m.ClientHost
					rm.SubscribedTopicNames = slices.Clone(m.Subscribed)
					for tid, parts := range m.Assignment {
						tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
						tp.TopicID, tp.Partitions = tid, slices.Clone(parts)
						if name, ok := b.topicsImage().ByID(tid); ok {
							tp.Topic = name
						}
						rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
					}
					g.Members = append(g.Members, rm)
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
		c.Reply(resp)
	}})
	return nil
}

func failShareGroupDescribe(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	for _, id := range req.GroupIDs {
		g := kmsg.NewShareGroupDescribeResponseGroup()
		g.GroupID, g.ErrorCode = id, code
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
