package consumergroup

import "fmt"

// Classic protocol requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
// reaching a consumer group, as Apache 4.0 handles them.
//
// An empty consumer group becomes a classic group on JoinGroup (Apache
// deletes it and creates a classic one; its offsets stay). A non-empty one
// refuses a member whose protocol type is not "consumer" with
// INCONSISTENT_GROUP_PROTOCOL. Apache lets a classic consumer join a
// non-empty consumer group — the online migration path, where members of
// both protocols share the group and the server-side assignment is handed
// to classic members through JoinGroup/SyncGroup. kaas does not run such
// mixed groups yet and refuses those members with
// INCONSISTENT_GROUP_PROTOCOL too (logging why): the classic consumer
// cannot join until the group is empty, then converts it.

// classicJoinToConsumer answers a JoinGroup to a non-empty consumer group.
func (g *Group) classicJoinToConsumer(r JoinRequest) JoinResult {
	memberID := r.MemberID
	if r.ProtocolType == ConsumerProtocolType && len(r.Protocols) > 0 {
		g.log.Info("classic member cannot join a non-empty consumer group: groups mixing both protocols are not supported yet",
			"member", memberID, "client", r.ClientID, "members", len(g.cg.members))
	} else {
		g.log.Info(fmt.Sprintf("Member %s's protocols are not supported.", memberID), "protocol_type", r.ProtocolType)
	}
	return joinError(memberID, errInconsistentProtocol)
}

// classicCallToConsumer is the code a SyncGroup, Heartbeat or LeaveGroup
// member gets from a consumer group: its members use the consumer
// protocol, so a classic call from one is from an unknown member, or from
// a fenced instance.
func (g *Group) classicCallToConsumer(memberID string, instanceID *string, op string) int16 {
	if instanceID != nil {
		if m := g.cg.staticMember(*instanceID); m != nil && memberID != "" && m.ID != memberID {
			g.log.Info("static member fenced by an existing member", "operation", op, "member", memberID, "instance_id", *instanceID, "owner", m.ID)
			return errFencedInstanceID
		}
	}
	return errUnknownMemberID
}

// convertToClassic deletes an empty consumer group so a classic one takes
// its id (Apache's maybeDeleteEmptyConsumerGroup); offsets stay.
func (g *Group) convertToClassic() {
	g.log.Info("empty consumer group becomes a classic group", "epoch", g.cg.epoch)
	recs := g.consumerTombstones()
	for _, m := range g.cg.members {
		g.cancelConsumerTimers(m)
	}
	g.cg = nil
	g.protocolType, g.generation = "", 0
	g.commitRecords(recs)
}
