package consumergroup

import "fmt"

// Join handles a JoinGroup (Apache's handleJoinGroup after the group was
// found or created; the session timeout is checked before that). reply is
// called once: at once, or when the rebalance completes.
func (g *Group) Join(r JoinRequest, reply func(JoinResult)) {
	if g.cg != nil && g.state != Dead {
		if !g.cg.isEmpty() {
			g.classicJoinToConsumer(r, reply)
			return
		}
		g.convertToClassic()
	}
	switch {
	case !g.acceptJoiningMember(r.MemberID):
		g.remove(r.MemberID)
		reply(joinError("", errGroupMaxSizeReached))
	case r.MemberID == "":
		g.newMemberJoin(r, reply)
	default:
		g.currentMemberJoin(r, reply)
	}
	if g.state == PreparingRebalance {
		g.tryCompleteJoin()
	}
}

// acceptJoiningMember is Apache's group.max.size check.
func (g *Group) acceptJoiningMember(id string) bool {
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		if m := g.members[id]; m != nil && m.isAwaitingJoin() {
			return true
		}
		return g.numAwaiting < g.cfg.MaxSize
	default:
		return g.members[id] != nil || len(g.members) < g.cfg.MaxSize
	}
}

func (g *Group) newMemberJoin(r JoinRequest, reply func(JoinResult)) {
	if g.state == Dead {
		reply(joinError("", errCoordinatorNotAvailable))
		return
	}
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		reply(joinError("", errInconsistentProtocol))
		return
	}
	newID := newMemberID(r.ClientID, r.InstanceID)
	if r.InstanceID != nil {
		if oldID, ok := g.static[*r.InstanceID]; ok {
			g.log.Info("static member rejoins with an unknown member id; replacing its old member id",
				"instance_id", *r.InstanceID, "old_member", oldID, "state", g.state)
			g.updateStaticMemberAndRebalance(oldID, newID, *r.InstanceID, r, reply)
			return
		}
		g.addMemberAndRebalance(r, newID, reply)
		return
	}
	if r.RequireKnownMemberID {
		// KIP-394: hand out the member id and wait for the member to
		// come back with it before it counts as a member.
		g.pending[newID] = g.scheduleTimer(msDuration(r.SessionTimeoutMs), Timer{kind: pendingMemberTimer, member: newID})
		reply(JoinResult{Err: errMemberIDRequired, MemberID: newID, Generation: -1})
		return
	}
	g.addMemberAndRebalance(r, newID, reply)
}

func (g *Group) currentMemberJoin(r JoinRequest, reply func(JoinResult)) {
	switch {
	case g.state == Dead:
		reply(joinError(r.MemberID, errCoordinatorNotAvailable))
		return
	case !g.supportsProtocols(r.ProtocolType, r.Protocols):
		reply(joinError(r.MemberID, errInconsistentProtocol))
		return
	}
	if _, ok := g.pending[r.MemberID]; ok {
		if r.InstanceID != nil {
			// Apache throws IllegalStateException: pending members are
			// never static.
			g.log.Error("JoinGroup with an instance id for a pending member", "member", r.MemberID, "instance_id", *r.InstanceID)
			reply(joinError(r.MemberID, errUnknownServerError))
			return
		}
		g.addMemberAndRebalance(r, r.MemberID, reply)
		return
	}
	if code := g.validateCurrentMember(r.MemberID, r.InstanceID, "join-group"); code != 0 {
		reply(joinError(r.MemberID, code))
		return
	}
	m := g.members[r.MemberID]
	switch g.state {
	case PreparingRebalance:
		g.updateMemberAndRebalance(m, r, reply, fmt.Sprintf("member %s joining group during %s; client reason: %s", m.ID, g.state, r.Reason))
	case CompletingRebalance:
		if m.matches(r.Protocols) {
			// Same metadata (it missed our answer): the current
			// generation again.
			var members []JoinMember
			if g.isLeader(m.ID) {
				members = g.currentMemberMetadata()
			}
			reply(g.currentJoinResult(m.ID, g.leader, members, false))
			return
		}
		g.updateMemberAndRebalance(m, r, reply, fmt.Sprintf("updating metadata for member %s during %s; client reason: %s", m.ID, g.state, r.Reason))
	case Stable:
		switch {
		case g.isLeader(m.ID):
			// A leader rejoining asks for a rebalance (e.g. topic
			// metadata changed).
			g.updateMemberAndRebalance(m, r, reply, fmt.Sprintf("leader %s re-joining group during %s; client reason: %s", m.ID, g.state, r.Reason))
		case !m.matches(r.Protocols):
			g.updateMemberAndRebalance(m, r, reply, fmt.Sprintf("updating metadata for member %s during %s; client reason: %s", m.ID, g.state, r.Reason))
		default:
			reply(g.currentJoinResult(m.ID, g.leader, nil, false))
		}
	default: // Empty
		g.log.Warn("rejoining member in unexpected group state", "member", m.ID, "state", g.state)
		reply(joinError(r.MemberID, errUnknownMemberID))
	}
}

func (g *Group) currentJoinResult(memberID, leader string, members []JoinMember, skip bool) JoinResult {
	res := JoinResult{MemberID: memberID, Generation: g.generation, ProtocolName: g.protocolName, Leader: leader, SkipAssignment: skip, Members: members}
	if g.protocolType != "" {
		pt := g.protocolType
		res.ProtocolType = &pt
	}
	return res
}

// validateCurrentMember checks that a group.instance.id, if given, maps to
// memberID, and that memberID is a member.
func (g *Group) validateCurrentMember(memberID string, instanceID *string, op string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return errUnknownMemberID
		case cur != memberID:
			g.log.Info("static member fenced by a newer member id", "operation", op, "member", memberID, "instance_id", *instanceID, "current_member", cur)
			return errFencedInstanceID
		}
		return 0
	}
	if g.members[memberID] == nil {
		return errUnknownMemberID
	}
	return 0
}

func (g *Group) addMemberAndRebalance(r JoinRequest, memberID string, reply func(JoinResult)) {
	m := &Member{
		ID: memberID, InstanceID: r.InstanceID, ClientID: r.ClientID, ClientHost: r.ClientHost,
		RebalanceTimeoutMs: r.RebalanceTimeoutMs, SessionTimeoutMs: r.SessionTimeoutMs,
		ProtocolType: r.ProtocolType, Protocols: r.Protocols, isNew: true,
	}
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m, reply)
	// A new member cannot heartbeat until it has its generation, and a
	// client that gave up on a long rebalance may simply retry with a
	// fresh join: the new-member timeout keeps those from piling up.
	g.scheduleExpiration(m, g.cfg.NewMemberJoinTimeout)
	g.maybePrepareRebalance(fmt.Sprintf("adding new member %s with group instance id %s; client reason: %s", memberID, strOrNone(r.InstanceID), r.Reason))
}

func (g *Group) updateMemberAndRebalance(m *Member, r JoinRequest, reply func(JoinResult), reason string) {
	g.updateMember(m, r.Protocols, r.RebalanceTimeoutMs, r.SessionTimeoutMs, reply)
	g.maybePrepareRebalance(reason)
}

// updateStaticMemberAndRebalance is KIP-345's restart path: a known
// group.instance.id rejoining without its member id takes over the old
// member. In a Stable group whose protocol would not change it keeps its
// assignment and no rebalance happens.
func (g *Group) updateStaticMemberAndRebalance(oldID, newID, instanceID string, r JoinRequest, reply func(JoinResult)) {
	currentLeader := g.leader
	m := g.replaceStaticMember(instanceID, oldID, newID)
	g.scheduleHeartbeat(m)
	oldProtocols, oldRebalance, oldSession := m.Protocols, m.RebalanceTimeoutMs, m.SessionTimeoutMs
	g.updateMember(m, r.Protocols, r.RebalanceTimeoutMs, r.SessionTimeoutMs, reply)

	switch g.state {
	case Stable:
		if g.protocolName == nil || *g.protocolName != g.selectProtocol() {
			g.maybePrepareRebalance(fmt.Sprintf("group's selected protocol will change because static member %s with instance id %s joined with a change of protocol; client reason: %s", newID, instanceID, r.Reason))
			return
		}
		generation := g.generation
		g.storeGroup(g.assignments(), func(code int16) {
			if code != 0 {
				g.log.Warn("failed to persist a replaced static member; reverting", "instance_id", instanceID, "code", code)
				g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
				old := g.replaceStaticMember(instanceID, newID, oldID)
				g.scheduleHeartbeat(old)
				res := g.currentJoinResult("", currentLeader, nil, false)
				res.Generation, res.Err = generation, code
				reply(res)
				return
			}
			if r.SupportSkipAssignment {
				// v9+: tell a static leader it leads, but that it must
				// not run the assignor while the group is Stable.
				isLeader := g.isLeader(newID)
				var members []JoinMember
				if isLeader {
					members = g.currentMemberMetadata()
				}
				g.maybeInvokeJoin(m, g.currentJoinResult(newID, g.leader, members, isLeader))
				return
			}
			// Before v9 the old leader id is returned so a rejoining
			// leader does not run a pointless assignment.
			g.maybeInvokeJoin(m, g.currentJoinResult(newID, currentLeader, nil, false))
		})
	case CompletingRebalance:
		// The leader may already be assigning to the old member id.
		g.prepareRebalance(fmt.Sprintf("updating metadata for static member %s with instance id %s; client reason: %s", newID, instanceID, r.Reason))
	case PreparingRebalance:
		// It is parked with the others.
	default:
		g.log.Error("static member rejoined a group in an impossible state", "instance_id", instanceID, "state", g.state)
	}
}

func strOrNone(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}
