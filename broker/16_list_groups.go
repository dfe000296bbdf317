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
//
// In a cluster a share group is listed by its coordinator, as every
// group is, also when its members are gone and its share state lives
// only with partitions other brokers own (Apache's coordinator keeps an
// empty share group until it is deleted): the coordinator asks every
// peer which share groups it keeps state of (this request, sent over
// the peer channel, which a peer answers with every share group it
// knows, coordinated here or not) and lists those whose slot it owns as
// Empty.
func serveListGroups(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if b.cluster != nil && b.sec.IsPeer(c) {
		return b.peerShareGroups(resp)
	}
	if resp.ErrorCode = b.coordinatorStatus(); resp.ErrorCode != 0 {
		return resp
	}
	a := b.sec.Access(c)
	everything := a.Visible(acl.Describe, acl.Cluster, acl.ClusterName)
	filtered := func(state, typ string) bool {
		return len(req.StatesFilter) > 0 && !slices.Contains(req.StatesFilter, state) ||
			len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(t string) bool { return strings.EqualFold(t, typ) })
	}
	visible := func(group, state, typ string) bool {
		return (everything || a.Visible(acl.Describe, acl.Group, group)) && !filtered(state, typ)
	}
	for _, h := range b.liveGroups() {
		s := h.Summary()
		if !visible(s.Group, s.State, s.Type) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = s.Group, s.ProtocolType, s.State, s.Type
		resp.Groups = append(resp.Groups, g)
	}
	if b.shares == nil {
		return resp
	}
	listed := map[string]bool{}
	share := func(id, state string) {
		// Listed once, and only by its coordinator: in a cluster this
		// broker also keeps share-partitions of groups another broker
		// coordinates (and lists).
		if listed[id] || b.groupSlotStatus(id) != 0 || !visible(id, state, "share") {
			return
		}
		listed[id] = true
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = id, "share", state, "share"
		resp.Groups = append(resp.Groups, g)
	}
	for _, l := range b.shares.Groups() {
		share(l.ID, l.State)
	}
	if b.cluster == nil || b.peers == nil || filtered("Empty", "share") {
		return resp
	}
	go func() {
		peers := b.askPeers(func() kmsg.Request {
			r := kmsg.NewPtrListGroupsRequest()
			r.TypesFilter = []string{"share"}
			return r
		})
		for _, r := range peers.got {
			if theirs, ok := r.(*kmsg.ListGroupsResponse); ok {
				for _, g := range theirs.Groups {
					share(g.Group, "Empty") // no members there: membership is the coordinator's
				}
			}
		}
		c.Reply(resp)
	}()
	return nil
}

// peerShareGroups answers a peer's ListGroups (sent by a coordinator,
// serveListGroups): every share group this broker keeps state of,
// whoever coordinates it; the coordinator did the authorization.
func (b *Broker) peerShareGroups(resp *kmsg.ListGroupsResponse) kmsg.Response {
	if b.shares == nil {
		return resp
	}
	for _, l := range b.shares.Groups() {
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = l.ID, "share", l.State, "share"
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

func failListGroups(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.ErrorCode = code
	return resp
}
