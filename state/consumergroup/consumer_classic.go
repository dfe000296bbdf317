package consumergroup

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/offsetlog"
)

// Classic protocol members inside a consumer group, as Apache 4.0 runs
// them (GroupMetadataManager's classicGroup*ToConsumerGroup): the online
// migration path between the two protocols.
//
// A consumer group that has members takes classic consumers too: their
// JoinGroup subscription (the embedded consumer protocol: topics, owned
// partitions, rack) makes them members like any other, assigned by the
// server-side assignor and reconciled with the same rules (a partition
// reaches its next owner only once the previous one revoked it). A
// classic member's generation is its member epoch; its JoinGroup answer
// names no leader, so it syncs at once and SyncGroup hands it its
// assigned partitions; Heartbeat answers REBALANCE_IN_PROGRESS when it
// must rejoin (the group epoch moved past it, it owes revocations, or
// partitions it waited for were released). Its session runs on its own
// session timeout; after a JoinGroup it has its rebalance timeout to
// sync, and after being told to rejoin, to rejoin.
//
// Conversions (group.consumer.migration.policy): a ConsumerGroupHeartbeat
// joining a non-empty classic group of consumers converts it in place
// (upgrade: members keep their generation and partitions, then rejoin to
// follow the new epoch); when the last member using the consumer protocol
// leaves and only classic members remain, the group becomes a classic
// group again (downgrade: each keeps its target partitions and the group
// rebalances), and so it does, without a rebalance, when a classic static
// member takes over that last member's instance id. An empty group
// converts either way on its first join.

// supportsClassicProtocols is Apache's ConsumerGroup.supportsClassicProtocols:
// a consumer protocol member with one protocol every classic member
// supports (any, when there is none).
func (cg *consumerGroup) supportsClassicProtocols(protocolType string, protocols []Protocol) bool {
	if protocolType != ConsumerProtocolType || len(protocols) == 0 {
		return false
	}
	n := 0
	counts := map[string]int{}
	for _, m := range cg.members {
		if m.Classic == nil {
			continue
		}
		n++
		for _, p := range m.Classic.Protocols {
			counts[p.Name]++
		}
	}
	return slices.ContainsFunc(protocols, func(p Protocol) bool { return counts[p.Name] == n })
}

// classicJoinToConsumer answers a JoinGroup to a non-empty consumer group
// (Apache's classicGroupJoinToConsumerGroup).
func (g *Group) classicJoinToConsumer(r JoinRequest, reply func(JoinResult)) {
	cg := g.cg
	memberID := r.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = newUUID()
	}
	if cg.isFull(g.cfg.ConsumerMaxSize, memberID) {
		reply(joinError(r.MemberID, errGroupMaxSizeReached))
		return
	}
	if !cg.supportsClassicProtocols(r.ProtocolType, r.Protocols) {
		g.log.Info(fmt.Sprintf("Member %s's protocols are not supported.", memberID), "protocol_type", r.ProtocolType)
		reply(joinError(r.MemberID, errInconsistentProtocol))
		return
	}
	if r.RequireKnownMemberID && unknown {
		g.log.Info("dynamic member with unknown member id joins the consumer group; it must rejoin with its new member id", "member", memberID)
		reply(JoinResult{Err: errMemberIDRequired, MemberID: memberID, Generation: -1})
		return
	}
	// Every protocol carries the same subscription; Apache reads any.
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(r.Protocols[0].Metadata); err != nil {
		g.log.Warn("malformed consumer protocol subscription in a JoinGroup to a consumer group", "member", memberID, "err", err)
		reply(joinError(r.MemberID, errUnknownServerError))
		return
	}

	var member, replaced *ConsumerMember
	hadStatic := r.InstanceID != nil && cg.staticMember(*r.InstanceID) != nil
	switch existing := (*ConsumerMember)(nil); {
	case r.InstanceID == nil:
		if member = cg.members[memberID]; member == nil {
			member = newConsumerMember(memberID)
		}
	case unknown:
		if existing = cg.staticMember(*r.InstanceID); existing == nil {
			if member = cg.members[memberID]; member == nil {
				member = newConsumerMember(memberID)
			}
			break
		}
		// A classic member replaces the instance's current member,
		// whichever protocol that one uses, taking its partitions.
		member = existing.copyMember()
		member.ID, member.Epoch, member.PreviousEpoch = memberID, 0, 0
		replaced = existing
	default:
		if existing = cg.staticMember(*r.InstanceID); existing == nil {
			reply(joinError(r.MemberID, errUnknownMemberID))
			return
		}
		if existing.ID != memberID {
			g.log.Info("static member fenced by an existing member", "member", memberID, "instance_id", *r.InstanceID, "owner", existing.ID)
			reply(joinError(r.MemberID, errFencedInstanceID))
			return
		}
		member = existing
	}
	switch {
	case replaced != nil:
		g.log.Info("static member rejoins the consumer group using the classic protocol", "member", memberID, "instance_id", *r.InstanceID, "replaced", replaced.ID)
	case cg.members[memberID] == nil:
		g.log.Info("member joins the consumer group using the classic protocol", "member", memberID, "instance_id", strOrNone(r.InstanceID))
	}
	updated := member.copyMember()
	if r.InstanceID != nil {
		updated.InstanceID = r.InstanceID
	}
	if sub.Rack != nil {
		updated.RackID = sub.Rack
	}
	if r.RebalanceTimeoutMs != -1 {
		updated.RebalanceTimeoutMs = r.RebalanceTimeoutMs
	}
	names := slices.Clone(sub.Topics)
	slices.Sort(names)
	updated.SubscribedTopicNames = slices.Compact(names)
	if updated.SubscribedTopicNames == nil {
		updated.SubscribedTopicNames = []string{}
	}
	updated.ClientID, updated.ClientHost = r.ClientID, r.ClientHost
	updated.Classic = &ClassicMeta{SessionTimeoutMs: r.SessionTimeoutMs, Protocols: slices.Clone(r.Protocols)}
	owned := g.ownedByName(sub.OwnedPartitions)
	if member.State == MemberUnknown && len(owned) > 0 {
		reply(joinError(r.MemberID, errFencedMemberEpoch))
		return
	}

	var recs []offsetlog.Record
	if replaced != nil {
		recs = append(recs, g.replaceStaticMember848(replaced, member)...)
	}
	// A classic member subscribes by name; regexes other members
	// use resolve with their own heartbeats' permissions.
	updated, recs, code, _ := g.admitMember(member, updated, owned, true, nil, recs)
	if code != 0 {
		reply(joinError(r.MemberID, code))
		return
	}
	pt, pn := ConsumerProtocolType, updated.Classic.Protocols[0].Name
	res := JoinResult{MemberID: updated.ID, Generation: updated.Epoch, ProtocolType: &pt, ProtocolName: &pn, Members: []JoinMember{}}
	if hadStatic && g.downgradeable("") {
		// Apache's step 4: the instance's previous member was the last
		// one on the consumer protocol. The group is a classic group
		// from here, this member holding that one's target, without a
		// rebalance.
		recs = append(recs, g.downgradeToClassic("", false)...)
	} else {
		g.cancelClassicJoin(updated)
		g.scheduleClassicSync(updated)
	}
	g.persistRecords(recs, func(code int16) {
		if code != 0 {
			reply(joinError(r.MemberID, code))
			return
		}
		reply(res)
	})
}

// ownedByName is the partitions a classic member reports owning, by
// topic id; topics that do not exist are left out (Apache's
// toTopicPartitions).
func (g *Group) ownedByName(owned []kmsg.ConsumerMemberMetadataOwnedPartition) Assignment {
	topics := g.env.Topics()
	out := Assignment{}
	for _, o := range owned {
		if id, _, ok := topics.ByName(o.Topic); ok {
			for _, p := range o.Partitions {
				out.add(id, p)
			}
		}
	}
	return out
}

// classicMember finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup names (Apache's validateConsumerGroupMember and
// throwIfMemberDoesNotUseClassicProtocol).
func (g *Group) classicMember(memberID string, instanceID *string, op string) (*ConsumerMember, int16) {
	cg := g.cg
	var m *ConsumerMember
	if instanceID == nil {
		m = cg.members[memberID]
	} else {
		m = cg.staticMember(*instanceID)
		if m != nil && m.ID != memberID {
			g.log.Info("static member fenced by an existing member", "operation", op, "member", memberID, "instance_id", *instanceID, "owner", m.ID)
			return nil, errFencedInstanceID
		}
	}
	if m == nil || m.Classic == nil {
		return nil, errUnknownMemberID
	}
	return m, 0
}

// classicSyncToConsumer answers a SyncGroup to a consumer group (Apache's
// classicGroupSyncToConsumerGroup): the member's assigned partitions, once
// every earlier write of the group is durable.
func (g *Group) classicSyncToConsumer(r SyncRequest, reply func(SyncResult)) {
	cg := g.cg
	m, code := g.classicMember(r.MemberID, r.InstanceID, "sync-group")
	switch {
	case code != 0:
	case r.Generation != m.Epoch:
		code = errIllegalGeneration
	case r.ProtocolType != nil && *r.ProtocolType != ConsumerProtocolType,
		r.ProtocolName != nil && *r.ProtocolName != m.Classic.Protocols[0].Name:
		code = errInconsistentProtocol
	case cg.epoch > m.Epoch && m.State != MemberUnrevokedPartitions:
		// A new epoch: rejoin first (while it owes revocations it
		// rejoins anyway once they are done).
		g.scheduleClassicJoin(m)
		code = errRebalanceInProgress
	}
	if code != 0 {
		reply(SyncResult{Err: code})
		return
	}
	assignment := g.classicAssignment(m.Assigned, m.Classic.Protocols[0].Metadata)
	id := m.ID
	g.persistRecords(nil, func(code int16) {
		if code != 0 {
			reply(SyncResult{Err: code})
			return
		}
		if cur := g.cg; cur != nil && cur.members[id] != nil {
			g.cancelClassicSync(cur.members[id])
			g.scheduleConsumerSession(cur.members[id])
		}
		reply(SyncResult{ProtocolType: r.ProtocolType, ProtocolName: r.ProtocolName, Assignment: assignment})
	})
}

// classicAssignment is an assignment in the embedded consumer protocol,
// at the version of the member's subscription (Apache's prepareAssignment:
// at most v3).
func (g *Group) classicAssignment(a Assignment, subscription []byte) []byte {
	var version int16
	if len(subscription) >= 2 {
		version = min(max(int16(subscription[0])<<8|int16(subscription[1]), 0), 3)
	}
	topics := g.env.Topics()
	out := kmsg.ConsumerMemberAssignment{Version: version, Topics: []kmsg.ConsumerMemberAssignmentTopic{}}
	for _, id := range a.sortedIDs() {
		if name, ok := topics.ByID(id); ok {
			out.Topics = append(out.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: slices.Clone(a[id])})
		}
	}
	slices.SortFunc(out.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int {
		if x.Topic < y.Topic {
			return -1
		}
		if x.Topic > y.Topic {
			return 1
		}
		return 0
	})
	return out.AppendTo(nil)
}

// classicHeartbeatToConsumer answers a Heartbeat to a consumer group
// (Apache's classicGroupHeartbeatToConsumerGroup).
func (g *Group) classicHeartbeatToConsumer(r HeartbeatRequest) int16 {
	cg := g.cg
	m, code := g.classicMember(r.MemberID, r.InstanceID, "heartbeat")
	if code != 0 {
		return code
	}
	if r.Generation != m.Epoch {
		return errIllegalGeneration
	}
	g.scheduleConsumerSession(m)
	if m.Epoch < cg.epoch || m.State == MemberUnrevokedPartitions ||
		(m.State == MemberUnreleasedPartitions && !cg.waitingOnUnreleased(m)) {
		g.scheduleClassicJoin(m)
		return errRebalanceInProgress
	}
	return 0
}

// waitingOnUnreleased reports whether a member still waits for a target
// partition another member holds (Apache's waitingOnUnreleasedPartition).
func (cg *consumerGroup) waitingOnUnreleased(m *ConsumerMember) bool {
	for id, ps := range cg.target[m.ID] {
		for _, p := range ps {
			if !m.Assigned.has(id, p) && cg.currentPartitionEpoch(id, p) != -1 {
				return true
			}
		}
	}
	return false
}

// classicLeaveToConsumer answers a LeaveGroup to a consumer group (Apache's
// classicGroupLeaveToConsumerGroup): the classic members named leave, the
// subscription follows and the group epoch is bumped, once durable.
func (g *Group) classicLeaveToConsumer(members []LeaveMember, reply func(int16, []LeaveResult)) {
	cg := g.cg
	out := make([]LeaveResult, 0, len(members))
	var recs []offsetlog.Record
	for _, lm := range members {
		res := LeaveResult{MemberID: lm.MemberID, InstanceID: lm.InstanceID}
		var m *ConsumerMember
		if lm.InstanceID == nil {
			m = cg.members[lm.MemberID]
		} else {
			m = cg.staticMember(*lm.InstanceID)
			if m != nil && lm.MemberID != "" && m.ID != lm.MemberID {
				// The member id may be empty: an admin removing
				// the instance.
				res.Err = errFencedInstanceID
				out = append(out, res)
				continue
			}
		}
		if m == nil || m.Classic == nil {
			res.Err = errUnknownMemberID
			out = append(out, res)
			continue
		}
		res.MemberID = m.ID
		reason := "not provided"
		if lm.Reason != nil {
			reason = *lm.Reason
		}
		g.log.Info("classic member left the consumer group through LeaveGroup", "member", m.ID, "instance_id", strOrNone(m.InstanceID), "reason", reason)
		g.cancelConsumerTimers(m)
		recs = append(recs, g.removeMemberRecords(m.ID)...)
		cg.dropMember(m.ID)
		out = append(out, res)
	}
	if len(recs) == 0 {
		reply(0, out)
		return
	}
	if sub := g.computeSubscription(cg.subscribedTopicNames(nil, nil)); !equalSubscriptions(sub, cg.subscription) {
		cg.subscription = sub
		recs = append(recs, g.subscriptionRecord(sub))
	}
	cg.epoch++
	recs = append(recs, g.epochRecord(cg.epoch))
	g.env.RebalanceStarted()
	cg.updateState()
	g.persistRecords(recs, func(code int16) {
		if code != 0 {
			reply(code, nil)
			return
		}
		reply(0, out)
	})
}

// scheduleClassicSync gives a classic member that joined its rebalance
// timeout to send SyncGroup.
func (g *Group) scheduleClassicSync(m *ConsumerMember) {
	g.cancelClassicSync(m)
	m.syncToken = g.token()
	m.syncCancel = g.scheduleTimer(msDuration(m.RebalanceTimeoutMs), Timer{kind: consumerSyncTimer, member: m.ID, token: m.syncToken})
}

func (g *Group) cancelClassicSync(m *ConsumerMember) {
	if m.syncCancel != nil {
		m.syncCancel()
		m.syncCancel = nil
	}
}

// scheduleClassicJoin gives a classic member told to rejoin its rebalance
// timeout to do so, unless that timeout already runs.
func (g *Group) scheduleClassicJoin(m *ConsumerMember) {
	if m.joinCancel != nil {
		return
	}
	m.joinToken = g.token()
	m.joinCancel = g.scheduleTimer(msDuration(m.RebalanceTimeoutMs), Timer{kind: consumerJoinTimer, member: m.ID, token: m.joinToken})
}

func (g *Group) cancelClassicJoin(m *ConsumerMember) {
	if m.joinCancel != nil {
		m.joinCancel()
		m.joinCancel = nil
	}
}

// Conversions between the two protocols.

// upgradeableClassic is Apache's validateOnlineUpgrade: a non-empty classic
// group may become a consumer group when the policy allows upgrades, its
// members are consumers with a chosen protocol, and they fit.
func (g *Group) upgradeableClassic() bool {
	switch {
	case !g.cfg.MigrationPolicy.upgradeEnabled():
		g.log.Info("cannot upgrade the classic group to a consumer group: online upgrade is disabled", "policy", g.cfg.MigrationPolicy)
	case g.protocolType != ConsumerProtocolType || g.protocolName == nil:
		g.log.Info("cannot upgrade the classic group to a consumer group: the group does not use the consumer embedded protocol", "protocol_type", g.protocolType)
	case len(g.members) > g.cfg.ConsumerMaxSize:
		g.log.Info("cannot upgrade the classic group to a consumer group: it has more members than group.consumer.max.size", "members", len(g.members))
	default:
		return true
	}
	return false
}

// upgradedGroup is the consumer group a classic group becomes (Apache's
// ConsumerGroup.fromClassicGroup): every member at the generation, Stable,
// owning and targeted at its last assignment. g is not changed.
func (g *Group) upgradedGroup() (*consumerGroup, error) {
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	for _, id := range g.order {
		m := g.members[id]
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(m.metadata(*g.protocolName)); err != nil {
			return nil, fmt.Errorf("member %s's subscription: %w", id, err)
		}
		var asg kmsg.ConsumerMemberAssignment
		if len(m.Assignment) > 0 {
			if err := asg.ReadFrom(m.Assignment); err != nil {
				return nil, fmt.Errorf("member %s's assignment: %w", id, err)
			}
		}
		owned := make([]kmsg.ConsumerMemberMetadataOwnedPartition, 0, len(asg.Topics))
		for _, t := range asg.Topics {
			owned = append(owned, kmsg.ConsumerMemberMetadataOwnedPartition(t))
		}
		assigned := g.ownedByName(owned)
		names := slices.Clone(sub.Topics)
		slices.Sort(names)
		if names = slices.Compact(names); names == nil {
			names = []string{}
		}
		cm := &ConsumerMember{
			ID: id, InstanceID: m.InstanceID, RackID: sub.Rack, ClientID: m.ClientID, ClientHost: m.ClientHost,
			SubscribedTopicNames: names, RebalanceTimeoutMs: m.RebalanceTimeoutMs,
			Classic: &ClassicMeta{SessionTimeoutMs: m.SessionTimeoutMs, Protocols: slices.Clone(m.Protocols)},
			Epoch:   g.generation, PreviousEpoch: g.generation, State: MemberStable,
			Assigned: assigned, PendingRevocation: Assignment{},
		}
		cg.target[id] = assigned.clone()
		cg.putMember(cm)
	}
	cg.metadataStale = true
	cg.updateState()
	return cg, nil
}

// upgradeToConsumer makes g the consumer group cg (built by upgradedGroup)
// and returns the records saying so (Apache's convertToConsumerGroup):
// parked JoinGroup and SyncGroup calls are answered REBALANCE_IN_PROGRESS,
// the classic metadata is tombstoned, the consumer group's records
// written, and every member's session runs on its classic timeout.
func (g *Group) upgradeToConsumer(cg *consumerGroup) []offsetlog.Record {
	g.log.Info("classic group upgraded to a consumer group", "generation", g.generation, "members", len(g.members))
	g.releaseClassicMembers(errRebalanceInProgress)
	if g.join != nil && g.join.cancelTimer != nil {
		g.join.cancelTimer()
	}
	g.join = nil
	g.cancelSyncExpiration()
	recs := g.convertToConsumer(cg)
	g.members, g.order, g.static = map[string]*Member{}, nil, map[string]string{}
	g.supported, g.pendingSync, g.numAwaiting = map[string]int{}, map[string]bool{}, 0
	g.state, g.stateTimeMs = Empty, g.nowMs()

	ids := cg.sortedMemberIDs()
	for _, id := range ids {
		recs = append(recs, g.memberRecord(cg.members[id]))
	}
	recs = append(recs, g.epochRecord(cg.epoch))
	for _, id := range ids {
		recs = append(recs, offsetlog.ConsumerTargetRecord(g.id, id, cg.target[id].toLog(), false))
	}
	te := cg.assignmentEpoch
	recs = append(recs, offsetlog.ConsumerTargetEpochRecord(g.id, &te))
	for _, id := range ids {
		m := cg.members[id]
		recs = append(recs, g.currentAssignmentRecord(m))
		g.scheduleConsumerSession(m)
	}
	return recs
}

// downgradeable is Apache's validateOnlineDowngradeWithFencedMember: when
// leaving leaves only classic members (at least one), the policy allows
// downgrades and they fit a classic group. With leaving "" (a classic
// static member took over an instance: Apache's
// validateOnlineDowngradeWithReplacedMemberId), every member must be
// classic.
func (g *Group) downgradeable(leaving string) bool {
	cg := g.cg
	for id, m := range cg.members {
		if id != leaving && m.Classic == nil {
			return false
		}
	}
	n := len(cg.members)
	if leaving != "" {
		n--
	}
	switch {
	case n < 1:
		return false
	case !g.cfg.MigrationPolicy.downgradeEnabled():
		g.log.Info("cannot downgrade the consumer group to a classic group: online downgrade is disabled", "policy", g.cfg.MigrationPolicy)
		return false
	case n > g.cfg.MaxSize:
		g.log.Info("cannot downgrade the consumer group to a classic group: it has more members than group.max.size", "members", n)
		return false
	}
	return true
}

// downgradeToClassic makes the consumer group a classic group without
// leaving (Apache's convertToClassicGroup and ClassicGroup.fromConsumerGroup):
// Stable at the group epoch, each member assigned its target, then (with
// rebalance) a rebalance so every member rejoins through the classic
// protocol. It
// returns the records: the consumer group's tombstones, then the classic
// group's metadata.
func (g *Group) downgradeToClassic(leaving string, rebalance bool) []offsetlog.Record {
	cg := g.cg
	recs := g.consumerTombstones()
	for _, m := range cg.members {
		g.cancelConsumerTimers(m)
	}
	g.cg = nil
	g.log.Info("consumer group downgraded to a classic group", "epoch", cg.epoch, "leaving", leaving, "members", len(cg.members)-1)
	g.protocolType, g.generation, g.leader = ConsumerProtocolType, cg.epoch, ""
	g.state, g.stateTimeMs = Stable, g.nowMs()
	for _, id := range cg.sortedMemberIDs() {
		if id == leaving {
			continue
		}
		m := cg.members[id]
		g.add(&Member{
			ID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeoutMs: m.RebalanceTimeoutMs, SessionTimeoutMs: m.Classic.SessionTimeoutMs,
			ProtocolType: ConsumerProtocolType, Protocols: slices.Clone(m.Classic.Protocols),
		}, nil)
	}
	name := g.selectProtocol()
	g.protocolName = &name
	g.subscribed = g.computeSubscribed()
	assignments := make(map[string][]byte, len(g.members))
	for _, id := range g.order {
		m := g.members[id]
		m.Assignment = g.classicAssignment(cg.target[id], m.metadata(name))
		assignments[id] = m.Assignment
		g.scheduleHeartbeat(m)
	}
	recs = append(recs, offsetlog.GroupRecord(g.id, g.metadataValue(assignments)))
	if rebalance {
		g.prepareRebalance(fmt.Sprintf("Downgrade group %s from consumer to classic.", g.id))
	}
	return recs
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
