package consumergroup

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"kaas/storage/offsetlog"
)

// ValidateConsumerHeartbeat is Apache 4.0's
// throwIfConsumerGroupHeartbeatRequestIsInvalid, checked before the group
// is looked up: INVALID_REQUEST or UNSUPPORTED_ASSIGNOR with Apache's
// message, or 0. From v1 the client generates its member id (KIP-1082).
func ValidateConsumerHeartbeat(group string, r ConsumerHeartbeatRequest, assignors []string) (int16, string) {
	blank := func(s *string) bool { return s != nil && strings.TrimSpace(*s) == "" }
	if (r.Version >= 1 || r.MemberEpoch > 0 || r.MemberEpoch == leaveEpoch) && strings.TrimSpace(r.MemberID) == "" {
		return errInvalidRequest, "MemberId can't be empty."
	}
	switch {
	case strings.TrimSpace(group) == "":
		return errInvalidRequest, "GroupId can't be empty."
	case blank(r.InstanceID):
		return errInvalidRequest, "InstanceId can't be empty."
	case blank(r.RackID):
		return errInvalidRequest, "RackId can't be empty."
	}
	switch {
	case r.MemberEpoch == joinEpoch:
		if r.RebalanceTimeoutMs == -1 {
			return errInvalidRequest, "RebalanceTimeoutMs must be provided in first request."
		}
		if r.Owned == nil || len(r.Owned) > 0 {
			return errInvalidRequest, "TopicPartitions must be empty when (re-)joining."
		}
		hasNames := len(r.SubscribedTopicNames) > 0
		hasRegex := r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != ""
		if !hasNames && !hasRegex {
			return errInvalidRequest, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
		}
	case r.MemberEpoch == staticLeaveEpoch:
		if r.InstanceID == nil {
			return errInvalidRequest, "InstanceId can't be null."
		}
	case r.MemberEpoch < staticLeaveEpoch:
		return errInvalidRequest, "MemberEpoch is invalid."
	}
	if r.ServerAssignor != nil && !slices.Contains(assignors, *r.ServerAssignor) {
		return errUnsupportedAssignor, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.", *r.ServerAssignor, strings.Join(assignors, ", "))
	}
	return 0, ""
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat (Apache's
// consumerGroupHeartbeat): join, leave, or keep a member's session alive
// and reconcile it towards its target assignment. reply is called once,
// when what the answer depends on is durable.
func (g *Group) ConsumerHeartbeat(r ConsumerHeartbeatRequest, reply func(ConsumerHeartbeatResult)) {
	if g.state == Dead {
		reply(heartbeatError(errCoordinatorNotAvailable, ""))
		return
	}
	if r.MemberEpoch == leaveEpoch || r.MemberEpoch == staticLeaveEpoch {
		g.consumerLeave(r, reply)
		return
	}
	create := r.MemberEpoch == joinEpoch
	// The group this heartbeat converts a classic group into: an empty
	// one for an empty classic group, the members carried over for a
	// non-empty one the migration policy lets upgrade (consumer_classic.go).
	var convert *consumerGroup
	if g.cg == nil {
		switch {
		case !create:
			reply(heartbeatError(errGroupIDNotFound, fmt.Sprintf(errGroupIDNotFoundMessage, g.id)))
			return
		case g.state == Empty:
			convert = newConsumerGroup()
		case !g.upgradeableClassic():
			reply(heartbeatError(errGroupIDNotFound, fmt.Sprintf(errGroupIDNotFoundMessage, g.id)))
			return
		default:
			up, err := g.upgradedGroup()
			if err != nil {
				g.log.Warn("cannot upgrade the classic group to a consumer group: its embedded consumer protocol is malformed", "err", err)
				reply(heartbeatError(errGroupIDNotFound, fmt.Sprintf("Cannot upgrade the classic group %s to consumer group because the embedded consumer protocol is malformed.", g.id)))
				return
			}
			convert = up
		}
	}

	// Phase 1: find the member and check everything that can fail.
	cg := g.cg
	if convert != nil {
		cg = convert
	}
	memberID := r.MemberID
	if cg.isFull(g.cfg.ConsumerMaxSize, memberID) {
		reply(heartbeatError(errGroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", g.cfg.ConsumerMaxSize)))
		return
	}
	if memberID == "" {
		memberID = newUUID() // v0: the coordinator names the member
	}
	owned, ownedKnown := ownedAssignment(r.Owned)
	var member, replaced *ConsumerMember
	if r.InstanceID == nil {
		member = cg.members[memberID]
		if member == nil {
			if !create {
				reply(heartbeatError(errUnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.id)))
				return
			}
			member = newConsumerMember(memberID)
		}
		if code, msg := checkMemberEpoch(member, r.MemberEpoch, owned, ownedKnown); code != 0 {
			reply(heartbeatError(code, msg))
			return
		}
	} else {
		existing := cg.staticMember(*r.InstanceID)
		switch {
		case create && existing == nil:
			if member = cg.members[memberID]; member == nil {
				member = newConsumerMember(memberID)
			}
		case create:
			// A classic member's instance is taken over at once
			// (Apache checks release only between consumer members).
			if existing.Classic == nil && existing.Epoch != staticLeaveEpoch {
				g.log.Info("static member cannot join: its instance id is still owned", "member", memberID, "instance_id", *r.InstanceID, "owner", existing.ID)
				reply(heartbeatError(errUnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, *r.InstanceID, existing.ID)))
				return
			}
			// It takes over the departed instance: same partitions,
			// new member id, epoch 0.
			member = existing.copyMember()
			member.ID, member.Epoch, member.PreviousEpoch = memberID, 0, 0
			replaced = existing
		default:
			if existing == nil {
				reply(heartbeatError(errUnknownMemberID, fmt.Sprintf("Instance id %s is unknown.", *r.InstanceID)))
				return
			}
			if existing.ID != memberID {
				g.log.Info("static member fenced by an existing member", "member", memberID, "instance_id", *r.InstanceID, "owner", existing.ID)
				reply(heartbeatError(errFencedInstanceID, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", memberID, *r.InstanceID, existing.ID)))
				return
			}
			if code, msg := checkMemberEpoch(existing, r.MemberEpoch, owned, ownedKnown); code != 0 {
				reply(heartbeatError(code, msg))
				return
			}
			member = existing
		}
	}
	updated := member.copyMember()
	if r.InstanceID != nil {
		updated.InstanceID = r.InstanceID
	}
	if r.RackID != nil {
		updated.RackID = r.RackID
	}
	if r.RebalanceTimeoutMs != -1 {
		updated.RebalanceTimeoutMs = r.RebalanceTimeoutMs
	}
	if r.ServerAssignor != nil {
		updated.ServerAssignor = *r.ServerAssignor
	}
	if r.SubscribedTopicNames != nil {
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		updated.SubscribedTopicNames = slices.Compact(names)
	}
	if r.SubscribedTopicRegex != nil {
		updated.SubscribedTopicRegex = *r.SubscribedTopicRegex
	}
	updated.ClientID, updated.ClientHost = r.ClientID, r.ClientHost
	updated.Classic = nil // it speaks the consumer protocol now
	if member.State == MemberUnknown && (!ownedKnown || len(owned) > 0) {
		// A state from a newer version (CurrentAssignmentBuilder's
		// UNKNOWN): the member must rejoin without partitions.
		reply(heartbeatError(errFencedMemberEpoch, errUnknownMemberState.Error()))
		return
	}
	if updated.SubscribedTopicRegex != member.SubscribedTopicRegex && updated.SubscribedTopicRegex != "" {
		if _, err := compileRegex(updated.SubscribedTopicRegex); err != nil {
			reply(heartbeatError(errInvalidRegex, "SubscribedTopicRegex `"+updated.SubscribedTopicRegex+"` is not a valid regular expression: "+err.Error()+"."))
			return
		}
	}

	// Phase 2: apply; from here nothing fails.
	var recs []offsetlog.Record
	switch {
	case convert != nil && g.state == Empty:
		g.log.Info("empty classic group becomes a consumer group", "generation", g.generation)
		recs = append(recs, g.convertToConsumer(cg)...)
	case convert != nil:
		recs = append(recs, g.upgradeToConsumer(cg)...)
	}
	if replaced != nil {
		recs = append(recs, g.replaceStaticMember848(replaced, member)...)
	}
	updated, recs, code, msg := g.admitMember(member, updated, owned, ownedKnown, r.CanDescribe, recs)
	if code != 0 {
		reply(heartbeatError(code, msg))
		return
	}

	res := ConsumerHeartbeatResult{MemberID: &updated.ID, MemberEpoch: updated.Epoch, HeartbeatIntervalMs: int32(g.cfg.ConsumerHeartbeatInterval.Milliseconds())}
	full := r.MemberEpoch == joinEpoch || (r.RebalanceTimeoutMs != -1 && (r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil) && r.Owned != nil)
	if full || !updated.Assigned.equal(member.Assigned) {
		res.Assignment, res.HasAssignment = updated.Assigned.clone(), true
	}
	g.persistRecords(recs, func(code int16) {
		if code != 0 {
			reply(heartbeatError(code, ""))
			return
		}
		reply(res)
	})
}

// admitMember is the part of a heartbeat (or of a classic member's
// JoinGroup) that cannot fail once the member was found: Apache's steps 1
// to 3 of consumerGroupHeartbeat. member is the member as the group knows
// it (new: not in the group yet), updated its new version from the
// request; the member record is written if it changed, a changed
// subscription bumps the group epoch, the target assignment is computed
// for a new epoch, and the member is reconciled towards its target with
// owned (what it reports owning; ownedKnown false: not reported);
// regexes it resolves keep the topics canDescribe allows. It
// returns the member as stored and the records to write after recs, or
// the error the heartbeat answers when the assignor failed.
func (g *Group) admitMember(member, updated *ConsumerMember, owned Assignment, ownedKnown bool, canDescribe func(string) bool, recs []offsetlog.Record) (*ConsumerMember, []offsetlog.Record, int16, string) {
	cg := g.cg
	_, inGroup := cg.members[member.ID]
	bump := cg.epoch == 0
	if !inGroup || !updated.sameMetadata(member) {
		recs = append(recs, g.memberRecord(updated))
		if !inGroup || !slices.Equal(updated.SubscribedTopicNames, member.SubscribedTopicNames) || updated.SubscribedTopicRegex != member.SubscribedTopicRegex {
			bump = true
		}
	}
	old := member
	if !inGroup {
		old = nil
	}
	u, code, msg := g.maybeUpdateRegexes(member, updated, canDescribe)
	if code != 0 {
		// Checked above; a regex another member already uses was valid.
		g.log.Error("regex failed validation after the member was admitted", "regex", updated.SubscribedTopicRegex, "msg", msg)
	}
	bump = bump || u.bump
	recs = append(recs, g.applyRegexUpdate(u)...)

	if bump || cg.metadataStale {
		sub := g.computeSubscription(cg.subscribedTopicNames(old, updated))
		if !equalSubscriptions(sub, cg.subscription) {
			bump = true
			cg.subscription = sub
			recs = append(recs, g.subscriptionRecord(sub))
		}
		cg.metadataStale = false
		if bump {
			cg.epoch++
			recs = append(recs, g.epochRecord(cg.epoch))
			g.log.Info("bumped the group epoch", "epoch", cg.epoch, "member", updated.ID)
			g.env.RebalanceStarted()
		}
	}
	if cg.epoch > cg.assignmentEpoch {
		trecs, err := g.computeTarget(cg.epoch, updated, "")
		if err != nil {
			// Apache answers UNKNOWN_SERVER_ERROR when the assignor fails.
			g.log.Error("computing the target assignment failed", "epoch", cg.epoch, "err", err)
			g.commitRecords(recs)
			return nil, nil, errUnknownServerError, fmt.Sprintf("Failed to compute a new target assignment for epoch %d: %v", cg.epoch, err)
		}
		recs = append(recs, trecs...)
	}

	before := updated
	if !updated.isReconciledTo(cg.assignmentEpoch) {
		// Cannot fail: the UNKNOWN state was answered above.
		updated, _ = cg.reconcile(updated, cg.assignmentEpoch, cg.target[updated.ID], owned, ownedKnown)
	}
	if changed := !updated.sameAssignment(before); changed || !inGroup {
		recs = append(recs, g.currentAssignmentRecord(updated))
		// The rebalance timeout runs while the member owes revocations.
		if updated.State == MemberUnrevokedPartitions {
			g.scheduleConsumerRebalance(updated)
		} else {
			g.cancelConsumerRebalance(updated)
		}
	}
	cg.putMember(updated)
	cg.updateState()
	g.scheduleConsumerSession(updated)
	return updated, recs, 0, ""
}

// commitRecords writes records whose answer is already decided.
func (g *Group) commitRecords(recs []offsetlog.Record) {
	if len(recs) > 0 {
		g.persistRecords(recs, func(int16) {})
	}
}

func newConsumerMember(id string) *ConsumerMember {
	return &ConsumerMember{ID: id, RebalanceTimeoutMs: -1, Assigned: Assignment{}, PendingRevocation: Assignment{}}
}

func (cg *consumerGroup) isFull(maxSize int, memberID string) bool {
	return len(cg.members) >= maxSize && (memberID == "" || cg.members[memberID] == nil)
}

// ownedAssignment reads the partitions a member reports; known is false
// when it did not report them.
func ownedAssignment(owned []OwnedTopic) (Assignment, bool) {
	if owned == nil {
		return nil, false
	}
	return assignmentOf(owned), true
}

// checkMemberEpoch is Apache's throwIfConsumerGroupMemberEpochIsInvalid:
// a member ahead of the coordinator is fenced; one behind is fenced unless
// it is one epoch behind and owns only what it was given (the answer
// bumping its epoch was lost).
func checkMemberEpoch(m *ConsumerMember, epoch int32, owned Assignment, ownedKnown bool) (int16, string) {
	switch {
	case epoch > m.Epoch:
		return errFencedMemberEpoch, fmt.Sprintf("The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
	case epoch < m.Epoch:
		if epoch != m.PreviousEpoch || !ownedKnown || !isSubset(owned, m.Assigned) {
			return errFencedMemberEpoch, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", epoch, m.Epoch)
		}
	}
	return 0, ""
}

func isSubset(owned, assigned Assignment) bool {
	for id, ps := range owned {
		for _, p := range ps {
			if !assigned.has(id, p) {
				return false
			}
		}
	}
	return true
}

// newUUID is a random member id as Apache's Uuid.randomUuid prints it
// (v0 heartbeats, where the coordinator names new members).
func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// convertToConsumer turns this classic group into the consumer group cg
// (Apache's getOrMaybeCreateConsumerGroup deleting an empty classic
// group, or converting a non-empty one): its metadata is tombstoned, its
// offsets stay.
func (g *Group) convertToConsumer(cg *consumerGroup) []offsetlog.Record {
	for id := range g.pending {
		g.dropPending(id)
	}
	g.cg = cg
	g.protocolType = ConsumerProtocolType
	g.protocolName, g.leader, g.generation, g.subscribed = nil, "", 0, nil
	return []offsetlog.Record{offsetlog.GroupTombstone(g.id)}
}

// replaceStaticMember848 hands a departed static member's place to the
// member rejoining with its instance id (Apache's replaceMember).
func (g *Group) replaceStaticMember848(old, m *ConsumerMember) []offsetlog.Record {
	cg := g.cg
	g.cancelConsumerTimers(old)
	target := cg.target[old.ID]
	recs := g.removeMemberRecords(old.ID)
	cg.dropMember(old.ID)
	if target == nil {
		target = Assignment{}
	}
	cg.target[m.ID] = target
	cg.putMember(m)
	g.log.Info("static member rejoined with a new member id", "instance_id", strOrNone(m.InstanceID), "member", m.ID, "replaced", old.ID)
	return append(recs, g.memberRecord(m), offsetlog.ConsumerTargetRecord(g.id, m.ID, target.toLog(), false), g.currentAssignmentRecord(m))
}

// consumerLeave handles epochs -1 (leave) and -2 (a static member leaving
// for now, keeping its partitions until it rejoins or its session ends).
func (g *Group) consumerLeave(r ConsumerHeartbeatRequest, reply func(ConsumerHeartbeatResult)) {
	cg := g.cg
	if cg == nil {
		reply(heartbeatError(errGroupIDNotFound, fmt.Sprintf(errGroupIDNotFoundMessage, g.id)))
		return
	}
	id := r.MemberID
	res := ConsumerHeartbeatResult{MemberID: &id, MemberEpoch: r.MemberEpoch}
	if r.InstanceID == nil {
		if cg.members[id] == nil {
			reply(heartbeatError(errUnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", id, g.id)))
			return
		}
		g.log.Info("member left the consumer group", "member", id)
		g.fenceConsumerMember(id, "", func(code int16) { replyCode(reply, res, code) }, nil)
		return
	}
	m := cg.staticMember(*r.InstanceID)
	switch {
	case m == nil:
		reply(heartbeatError(errUnknownMemberID, fmt.Sprintf("Instance id %s is unknown.", *r.InstanceID)))
		return
	case m.ID != id:
		reply(heartbeatError(errFencedInstanceID, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", id, *r.InstanceID, m.ID)))
		return
	}
	if r.MemberEpoch == leaveEpoch {
		g.log.Info("static member left the consumer group", "member", id, "instance_id", *r.InstanceID)
		g.fenceConsumerMember(id, "", func(code int16) { replyCode(reply, res, code) }, nil)
		return
	}
	g.log.Info("static member temporarily left the consumer group", "member", id, "instance_id", *r.InstanceID)
	left := m.copyMember()
	left.Epoch, left.PendingRevocation = staticLeaveEpoch, Assignment{}
	cg.putMember(left)
	cg.updateState()
	g.persistRecords([]offsetlog.Record{g.currentAssignmentRecord(left)}, func(code int16) { replyCode(reply, res, code) })
}

func replyCode(reply func(ConsumerHeartbeatResult), res ConsumerHeartbeatResult, code int16) {
	if code != 0 {
		reply(heartbeatError(code, ""))
		return
	}
	reply(res)
}

// fenceConsumerMember removes a member (Apache's consumerGroupFenceMember):
// its records are tombstoned, the subscription recomputed without it and
// the group epoch bumped, so the others' targets move its partitions. A
// resolved regex only it used goes too. done gets the write's code; recs
// are written first. When only classic members remain and the migration
// policy allows it, the group becomes a classic group instead.
func (g *Group) fenceConsumerMember(id, reason string, done func(code int16), recs []offsetlog.Record) {
	cg := g.cg
	m := cg.members[id]
	if reason != "" {
		g.log.Info("member fenced from the consumer group", "member", id, "reason", reason)
	}
	if g.downgradeable(id) {
		g.persistRecords(append(recs, g.downgradeToClassic(id, true)...), done)
		return
	}
	g.cancelConsumerTimers(m)
	recs = append(recs, g.removeMemberRecords(id)...)
	if m.SubscribedTopicRegex != "" && cg.subscribedRegexes(m, nil)[m.SubscribedTopicRegex] == 0 {
		delete(cg.regexes, m.SubscribedTopicRegex)
		recs = append(recs, offsetlog.ConsumerRegexRecord(g.id, m.SubscribedTopicRegex, nil))
	}
	sub := g.computeSubscription(cg.subscribedTopicNames(m, nil))
	if !equalSubscriptions(sub, cg.subscription) {
		cg.subscription = sub
		recs = append(recs, g.subscriptionRecord(sub))
	}
	cg.dropMember(id)
	cg.epoch++
	recs = append(recs, g.epochRecord(cg.epoch))
	g.env.RebalanceStarted()
	cg.updateState()
	g.persistRecords(recs, done)
}

// scheduleConsumerSession restarts a member's session timeout
// (group.consumer.session.timeout.ms, or a classic member's own).
func (g *Group) scheduleConsumerSession(m *ConsumerMember) {
	if m.sessionCancel != nil {
		m.sessionCancel()
	}
	m.sessionToken = g.token()
	d := g.cfg.ConsumerSessionTimeout
	if m.Classic != nil {
		d = msDuration(m.Classic.SessionTimeoutMs)
	}
	m.sessionCancel = g.scheduleTimer(d, Timer{kind: consumerSessionTimer, member: m.ID, token: m.sessionToken})
}

// scheduleConsumerRebalance gives a member its rebalance timeout to revoke
// what it must, at its current epoch.
func (g *Group) scheduleConsumerRebalance(m *ConsumerMember) {
	if m.rebalanceCancel != nil {
		m.rebalanceCancel()
	}
	m.rebalanceToken = g.token()
	d := time.Duration(m.RebalanceTimeoutMs) * time.Millisecond
	m.rebalanceCancel = g.scheduleTimer(d, Timer{kind: consumerRebalanceTimer, member: m.ID, token: m.rebalanceToken, generation: m.Epoch})
}

func (g *Group) cancelConsumerRebalance(m *ConsumerMember) {
	if m.rebalanceCancel != nil {
		m.rebalanceCancel()
		m.rebalanceCancel = nil
	}
}

func (g *Group) cancelConsumerTimers(m *ConsumerMember) {
	if m == nil {
		return
	}
	if m.sessionCancel != nil {
		m.sessionCancel()
		m.sessionCancel = nil
	}
	g.cancelConsumerRebalance(m)
	g.cancelClassicJoin(m)
	g.cancelClassicSync(m)
}

// fireConsumer handles a consumer group's timers.
func (g *Group) fireConsumer(t Timer) {
	cg := g.cg
	if cg == nil || g.state == Dead {
		return
	}
	m := cg.members[t.member]
	if m == nil {
		return
	}
	switch t.kind {
	case consumerSessionTimer:
		if m.sessionToken != t.token {
			return
		}
		m.sessionCancel = nil
		g.fenceConsumerMember(m.ID, "the member session expired", func(int16) {}, nil)
	case consumerRebalanceTimer:
		if m.rebalanceToken != t.token {
			return
		}
		m.rebalanceCancel = nil
		if m.Epoch != t.generation {
			return
		}
		g.fenceConsumerMember(m.ID, fmt.Sprintf("it failed to transition from epoch %d within %dms", t.generation, m.RebalanceTimeoutMs), func(int16) {}, nil)
	case consumerJoinTimer:
		if m.joinToken != t.token {
			return
		}
		m.joinCancel = nil
		g.fenceConsumerMember(m.ID, "the classic member failed to join within the rebalance timeout", func(int16) {}, nil)
	case consumerSyncTimer:
		if m.syncToken != t.token {
			return
		}
		m.syncCancel = nil
		g.fenceConsumerMember(m.ID, "the member failed to sync within timeout", func(int16) {}, nil)
	}
}
