package consumergroup

import (
	"fmt"
	"time"
)

func msDuration(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

func (g *Group) token() uint64 {
	g.nextToken++
	return g.nextToken
}

func (g *Group) scheduleTimer(d time.Duration, t Timer) func() {
	return g.env.Schedule(d, t)
}

// scheduleHeartbeat restarts a member's session timer (Apache's
// completeAndScheduleNextHeartbeatExpiration).
func (g *Group) scheduleHeartbeat(m *Member) {
	g.scheduleExpiration(m, msDuration(m.SessionTimeoutMs))
}

// scheduleExpiration replaces the member's pending expiry with one after
// d. The token makes an expiry that was already queued when it was
// replaced harmless.
func (g *Group) scheduleExpiration(m *Member, d time.Duration) {
	if m.hbCancel != nil {
		m.hbCancel()
	}
	m.heartbeatSatisfied = false
	m.hbToken = g.token()
	m.hbCancel = g.scheduleTimer(d, Timer{kind: heartbeatTimer, member: m.ID, token: m.hbToken})
}

// Fire handles an expired timer.
func (g *Group) Fire(t Timer) {
	switch t.kind {
	case heartbeatTimer:
		m := g.members[t.member]
		if m == nil || m.hbToken != t.token || g.state == Dead {
			return
		}
		m.hbCancel = nil
		if !m.hasSatisfiedHeartbeat() {
			g.log.Info("member failed its session timeout; removing it from the group", "member", m.ID, "session_timeout_ms", m.SessionTimeoutMs)
			g.removeMemberAndUpdateGroup(m, fmt.Sprintf("removing member %s on heartbeat expiration", m.ID))
		}
	case pendingMemberTimer:
		if _, ok := g.pending[t.member]; ok && g.state != Dead {
			g.log.Info("pending member did not rejoin within its session timeout; removing it", "member", t.member)
			g.removePendingMemberAndUpdateGroup(t.member)
		}
	case joinTimer:
		if g.join == nil || g.join.token != t.token {
			return
		}
		op := g.join
		if op.initial && g.newMemberAdded && op.remaining != 0 {
			// More members arrived during the initial delay: wait
			// again, within the rebalance timeout.
			g.newMemberAdded = false
			delay := min(op.configured, op.remaining)
			remaining := max(op.remaining-op.delay, 0)
			g.startJoin(&joinOp{initial: true, configured: op.configured, delay: delay, remaining: remaining})
			return
		}
		g.completeJoin()
	case syncTimer:
		if g.sync == nil || g.sync.token != t.token {
			return
		}
		g.sync = nil
		g.expirePendingSync(t.generation)
	case consumerSessionTimer, consumerRebalanceTimer, consumerJoinTimer, consumerSyncTimer:
		g.fireConsumer(t)
	}
}

func (g *Group) canRebalance() bool { return CanTransition(g.state, PreparingRebalance) }

func (g *Group) maybePrepareRebalance(reason string) {
	if g.canRebalance() {
		g.prepareRebalance(reason)
	}
}

// prepareRebalance moves the group to PreparingRebalance and starts the
// wait for members to join: the initial delay for a group formed from
// Empty, the rebalance timeout otherwise.
func (g *Group) prepareRebalance(reason string) {
	if g.state == CompletingRebalance {
		g.resetAndPropagateAssignmentError(errRebalanceInProgress)
	}
	g.cancelSyncExpiration()
	var op *joinOp
	if g.state == Empty {
		delay := g.cfg.InitialRebalanceDelay.Milliseconds()
		op = &joinOp{initial: true, configured: delay, delay: delay, remaining: max(g.rebalanceTimeoutMs()-delay, 0)}
	} else {
		op = &joinOp{delay: g.rebalanceTimeoutMs()}
	}
	g.log.Info("preparing to rebalance group", "state", g.state, "old_generation", g.generation, "reason", reason)
	g.transition(PreparingRebalance)
	g.env.RebalanceStarted()
	g.startJoin(op)
}

func (g *Group) startJoin(op *joinOp) {
	if g.join != nil && g.join.cancelTimer != nil {
		g.join.cancelTimer()
	}
	op.token = g.token()
	g.join = op
	op.cancelTimer = g.scheduleTimer(time.Duration(op.delay)*time.Millisecond, Timer{kind: joinTimer, token: op.token})
	g.tryCompleteJoin()
}

// tryCompleteJoin completes the rebalance's join phase once every known
// member has rejoined (the initial delay always runs its course).
func (g *Group) tryCompleteJoin() {
	if g.join != nil && !g.join.initial && g.hasAllMembersJoined() {
		g.completeJoin()
	}
}

// completeJoin is Apache's onCompleteJoin: drop dynamic members that did
// not rejoin, start the next generation and answer every parked JoinGroup
// (the leader with the member list).
func (g *Group) completeJoin() {
	if g.join != nil {
		if g.join.cancelTimer != nil {
			g.join.cancelTimer()
		}
		g.join = nil
	}
	for _, id := range append([]string(nil), g.order...) {
		m := g.members[id]
		if !m.isAwaitingJoin() && !m.isStatic() {
			g.log.Info("removing dynamic member that did not rejoin", "member", id)
			g.remove(id)
		}
	}
	if g.state == Dead {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Only static members that have not rejoined are left: wait
		// for them, or for their session timeouts.
		g.log.Error("group could not complete rebalance because no members rejoined")
		g.startJoin(&joinOp{delay: g.rebalanceTimeoutMs()})
		return
	}
	g.initNextGeneration()
	if g.state == Empty {
		g.log.Info("group is now empty", "generation", g.generation)
		g.storeGroup(nil, func(code int16) {
			if code != 0 {
				g.log.Warn("failed to write empty group metadata", "code", code)
			}
		})
		return
	}
	g.log.Info("stabilized group", "generation", g.generation, "members", len(g.members), "protocol", strOrNone(g.protocolName))
	for _, id := range g.order {
		m := g.members[id]
		var members []JoinMember
		if g.isLeader(id) {
			members = g.currentMemberMetadata()
		}
		g.maybeInvokeJoin(m, g.currentJoinResult(id, g.leader, members, false))
		g.scheduleHeartbeat(m)
		m.isNew = false
		g.pendingSync[id] = true
	}
	t := g.token()
	g.sync = &syncOp{token: t, generation: g.generation}
	g.sync.cancelTimer = g.scheduleTimer(time.Duration(g.rebalanceTimeoutMs())*time.Millisecond, Timer{kind: syncTimer, token: t, generation: g.generation})
}

// maybeElectNewJoinedLeader keeps the leader if it rejoined, else picks
// any member that did; false if none did (or there is no leader).
func (g *Group) maybeElectNewJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.isAwaitingJoin() {
		return true
	}
	for _, id := range g.order {
		if g.members[id].isAwaitingJoin() {
			g.log.Info("group leader failed to rejoin before the rebalance timeout; electing another", "old_leader", g.leader, "new_leader", id)
			g.leader = id
			return true
		}
	}
	g.log.Info("group leader failed to rejoin and no other member joined", "leader", g.leader)
	return false
}

func (g *Group) initNextGeneration() {
	g.generation++
	if len(g.members) > 0 {
		p := g.selectProtocol()
		g.protocolName = &p
		g.subscribed = g.computeSubscribed()
		g.transition(CompletingRebalance)
	} else {
		g.protocolName = nil
		g.subscribed = g.computeSubscribed()
		g.transition(Empty)
	}
	g.gotPlain, g.gotTxn = false, false
	clear(g.pendingSync)
}

func (g *Group) cancelSyncExpiration() {
	clear(g.pendingSync)
	g.maybeCompleteSyncExpiration()
}

// maybeCompleteSyncExpiration retires the pending-sync expiry once it has
// nothing left to do (Apache's tryCompletePendingSync).
func (g *Group) maybeCompleteSyncExpiration() {
	op := g.sync
	if op == nil {
		return
	}
	done := op.generation != g.generation || len(g.pendingSync) == 0
	switch g.state {
	case Dead, Empty, PreparingRebalance:
		done = true
	}
	if done {
		if op.cancelTimer != nil {
			op.cancelTimer()
		}
		g.sync = nil
	}
}

// expirePendingSync removes members that got a generation but did not
// send SyncGroup within the rebalance timeout, and rebalances.
func (g *Group) expirePendingSync(generation int32) {
	if generation != g.generation {
		g.log.Error("sync expiration for an old generation", "generation", generation, "current", g.generation)
		return
	}
	switch g.state {
	case CompletingRebalance, Stable:
	default:
		g.log.Error("sync expiration after the group left the sync phase", "state", g.state)
		return
	}
	if len(g.pendingSync) == 0 {
		return
	}
	var gone []string
	for id := range g.pendingSync {
		gone = append(gone, id)
	}
	for _, id := range gone {
		g.remove(id)
	}
	g.prepareRebalance(fmt.Sprintf("removing %v on pending sync request expiration", gone))
}

func (g *Group) removeMemberAndUpdateGroup(m *Member, reason string) {
	// A new member may still be parked in JoinGroup: tell it to start
	// over.
	g.maybeInvokeJoin(m, joinError("", errUnknownMemberID))
	g.remove(m.ID)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalance(reason)
	case PreparingRebalance:
		g.tryCompleteJoin()
	}
}

func (g *Group) removePendingMemberAndUpdateGroup(id string) {
	g.remove(id)
	if g.state == PreparingRebalance {
		g.tryCompleteJoin()
	}
}

// Heartbeat handles a Heartbeat and returns its error code.
func (g *Group) Heartbeat(r HeartbeatRequest) int16 {
	if g.state == Dead {
		return errCoordinatorNotAvailable
	}
	if g.cg != nil {
		return g.classicHeartbeatToConsumer(r)
	}
	if code := g.validateCurrentMember(r.MemberID, r.InstanceID, "heartbeat"); code != 0 {
		return code
	}
	if r.Generation != g.generation {
		return errIllegalGeneration
	}
	m := g.members[r.MemberID]
	switch g.state {
	case Empty:
		return errUnknownMemberID
	case CompletingRebalance, Stable:
		g.scheduleHeartbeat(m)
		return 0
	default: // PreparingRebalance
		g.scheduleHeartbeat(m)
		return errRebalanceInProgress
	}
}

// Leave handles a LeaveGroup: reply gets a top-level error, or one result
// per member named (for a consumer group, once the removal is durable).
func (g *Group) Leave(members []LeaveMember, reply func(int16, []LeaveResult)) {
	if g.state == Dead {
		reply(errCoordinatorNotAvailable, nil)
		return
	}
	if g.cg != nil {
		g.classicLeaveToConsumer(members, reply)
		return
	}
	reply(g.leaveClassic(members))
}

func (g *Group) leaveClassic(members []LeaveMember) (int16, []LeaveResult) {
	out := make([]LeaveResult, 0, len(members))
	for _, lm := range members {
		res := LeaveResult{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
		switch {
		case lm.MemberID == "":
			// Admin removal by group.instance.id.
			cur, ok := "", false
			if lm.InstanceID != nil {
				cur, ok = g.static[*lm.InstanceID]
			}
			if ok {
				g.removeCurrentMember(cur, lm.Reason)
			} else {
				res.Err = errUnknownMemberID
			}
		case g.isPending(lm.MemberID):
			g.removePendingMemberAndUpdateGroup(lm.MemberID)
			g.log.Info("pending member left the group", "member", lm.MemberID)
		default:
			if res.Err = g.validateCurrentMember(lm.MemberID, lm.InstanceID, "leave-group"); res.Err == 0 {
				g.removeCurrentMember(lm.MemberID, lm.Reason)
			}
		}
		out = append(out, res)
	}
	return 0, out
}

// releaseClassicMembers answers every parked JoinGroup and SyncGroup with
// code and stops the members' session timers (the group is unloaded, or
// becomes a consumer group).
func (g *Group) releaseClassicMembers(code int16) {
	for _, id := range g.order {
		m := g.members[id]
		g.maybeInvokeJoin(m, joinError(id, code))
		g.maybeInvokeSync(m, SyncResult{Err: code})
		if m.hbCancel != nil {
			m.hbCancel()
			m.hbCancel = nil
		}
	}
}

func (g *Group) isPending(id string) bool {
	_, ok := g.pending[id]
	return ok
}

func (g *Group) removeCurrentMember(id string, reason *string) {
	r := "not provided"
	if reason != nil {
		r = *reason
	}
	g.log.Info("member left the group through LeaveGroup", "member", id, "reason", r)
	g.removeMemberAndUpdateGroup(g.members[id], fmt.Sprintf("removing member %s on LeaveGroup; client reason: %s", id, r))
}

// Unload is Apache's onGroupUnloaded, run when the broker stops: the
// group goes Dead in memory (its log is untouched, so it reloads on the
// next start) and every parked JoinGroup and SyncGroup is answered
// NOT_COORDINATOR, so clients go looking for the coordinator again.
func (g *Group) Unload() {
	g.log.Info("unloading group", "generation", g.generation)
	g.removals++ // a delete failing now must not revive it
	g.transition(Dead)
	if g.cg != nil {
		for _, m := range g.cg.members {
			g.cancelConsumerTimers(m)
		}
	}
	g.releaseClassicMembers(errNotCoordinator)
	for id := range g.pending {
		g.dropPending(id)
	}
	if g.join != nil && g.join.cancelTimer != nil {
		g.join.cancelTimer()
	}
	g.join = nil
	g.maybeCompleteSyncExpiration()
}
