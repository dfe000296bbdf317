package consumergroup

// Sync handles a SyncGroup (Apache's doSyncGroup). Followers are parked
// until the leader's assignment is durable; reply is called once.
func (g *Group) Sync(r SyncRequest, reply func(SyncResult)) {
	if g.cg != nil && g.state != Dead {
		g.classicSyncToConsumer(r, reply)
		return
	}
	if code := g.validateSync(r); code != 0 {
		reply(SyncResult{Err: code})
		return
	}
	switch g.state {
	case Empty:
		reply(SyncResult{Err: errUnknownMemberID})
	case PreparingRebalance:
		reply(SyncResult{Err: errRebalanceInProgress})
	case CompletingRebalance:
		m := g.members[r.MemberID]
		m.awaitingSync = reply
		g.removePendingSyncMember(r.MemberID)
		if !g.isLeader(r.MemberID) {
			return
		}
		g.log.Info("assignment received from leader", "leader", r.MemberID, "generation", g.generation, "members", len(g.members), "static_members", len(g.static))
		assignment := make(map[string][]byte, len(g.members))
		var missing []string
		for _, id := range g.order {
			a, ok := r.Assignments[id]
			if !ok {
				missing = append(missing, id)
				a = []byte{}
			}
			assignment[id] = a
		}
		if len(missing) > 0 {
			g.log.Warn("leader sent no assignment for some members; giving them an empty one", "members", missing, "generation", g.generation)
		}
		generation := g.generation
		g.storeGroup(assignment, func(code int16) {
			// Another member may have joined meanwhile: only the same
			// generation, still waiting for its assignment, moves on.
			if g.state != CompletingRebalance || generation != g.generation {
				return
			}
			if code != 0 {
				g.resetAndPropagateAssignmentError(code)
				g.maybePrepareRebalance("error storing the group assignment during SyncGroup")
				return
			}
			for _, id := range g.order {
				g.members[id].Assignment = assignment[id]
			}
			g.propagateAssignment(0)
			g.transition(Stable)
		})
	case Stable:
		g.removePendingSyncMember(r.MemberID)
		m := g.members[r.MemberID]
		res := SyncResult{ProtocolName: g.protocolName, Assignment: m.Assignment}
		if g.protocolType != "" {
			pt := g.protocolType
			res.ProtocolType = &pt
		}
		reply(res)
		g.scheduleHeartbeat(m)
	}
}

func (g *Group) validateSync(r SyncRequest) int16 {
	if g.state == Dead {
		return errCoordinatorNotAvailable
	}
	if code := g.validateCurrentMember(r.MemberID, r.InstanceID, "sync-group"); code != 0 {
		return code
	}
	switch {
	case r.Generation != g.generation:
		return errIllegalGeneration
	case r.ProtocolType != nil && (g.protocolType == "" || *r.ProtocolType != g.protocolType):
		return errInconsistentProtocol
	case r.ProtocolName != nil && (g.protocolName == nil || *r.ProtocolName != *g.protocolName):
		return errInconsistentProtocol
	}
	return 0
}

func (g *Group) removePendingSyncMember(id string) {
	delete(g.pendingSync, id)
	g.maybeCompleteSyncExpiration()
}

func (g *Group) resetAndPropagateAssignmentError(code int16) {
	for _, m := range g.members {
		m.Assignment = []byte{}
	}
	g.propagateAssignment(code)
}

// propagateAssignment answers every parked SyncGroup and restarts those
// members' session timers (their expiry was ignored while they waited).
func (g *Group) propagateAssignment(code int16) {
	var pt, pn *string
	if code == 0 {
		pn = g.protocolName
		if g.protocolType != "" {
			s := g.protocolType
			pt = &s
		}
	}
	for _, id := range g.order {
		m := g.members[id]
		if len(m.Assignment) == 0 && code == 0 {
			g.log.Warn("sending an empty assignment", "member", id, "generation", g.generation)
		}
		if g.maybeInvokeSync(m, SyncResult{Err: code, ProtocolType: pt, ProtocolName: pn, Assignment: m.Assignment}) {
			g.scheduleHeartbeat(m)
		}
	}
}
