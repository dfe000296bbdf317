package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 16, min: 0, max: 5, serve: serveListGroups, fail: failListGroups})
}

// serveListGroups serves ListGroups (key 16), versions 0–5.
//
// Every group this broker coordinates with its protocol type (Apache's
// handleListGroups); v4 adds each group's state and a states filter (exact
// state names; empty means all); v5 (KIP-848) each group's type (classic
// or consumer) and a types filter (case-insensitive, as Apache parses
// group types; empty means all). Read from the summaries the group actors
// publish, without asking them.
//
// With --authorizer: every group with DESCRIBE on the cluster, else the
// groups the principal may DESCRIBE. Share groups (KIP-932) are listed
// with type and protocol type "share", state Empty or Stable.
func serveListGroups(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if resp.ErrorCode = b.coordinatorStatus(); resp.ErrorCode != 0 {
		return resp
	}
	a := b.sec.Access(c)
	everything := a.Visible(acl.Describe, acl.Cluster, acl.ClusterName)
	for _, h := range b.liveGroups() {
		s := h.Summary()
		if !everything && !a.Visible(acl.Describe, acl.Group, s.Group) {
			continue
		}
		if len(req.StatesFilter) > 0 && !slices.Contains(req.StatesFilter, s.State) {
			continue
		}
		if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, s.Type) }) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = s.Group, s.ProtocolType, s.State, s.Type
		resp.Groups = append(resp.Groups, g)
	}
	if b.shares != nil {
		for _, l := range b.shares.Groups() {
			if b.groupSlotStatus(l.ID) != 0 {
				// In a cluster: a group this broker keeps share-partitions
				// of, whose coordinator is another broker (which lists it).
				continue
			}
			if !everything && !a.Visible(acl.Describe, acl.Group, l.ID) {
				continue
			}
			if len(req.StatesFilter) > 0 && !slices.Contains(req.StatesFilter, l.State) {
				continue
			}
			if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, "share") }) {
				continue
			}
			g := kmsg.NewListGroupsResponseGroup()
			g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.ID, "share", l.State, "share"
			resp.Groups = append(resp.Groups, g)
		}
	}
	return resp
}

func failListGroups(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.ErrorCode = code
	return resp
}
