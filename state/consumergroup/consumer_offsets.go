package consumergroup

// validateConsumerCommit is Apache's ConsumerGroup.validateOffsetCommit
// for OffsetCommit and TxnOffsetCommit: without a member (epoch < 0) only
// an empty group takes commits; a member must exist, commit with
// OffsetCommit v9+ (KIP-848) unless transactional or a classic member,
// and give its current epoch (memberEpochCode).
func (g *Group) validateConsumerCommit(r CommitRequest, txn bool) int16 {
	cg := g.cg
	if r.Generation < 0 && cg.isEmpty() {
		return 0
	}
	m := cg.members[r.MemberID]
	if m == nil {
		return errUnknownMemberID
	}
	if !txn && m.Classic == nil && r.Version < 9 {
		g.log.Info("OffsetCommit below v9 from a consumer group member", "member", r.MemberID, "version", r.Version)
		return errUnsupportedVersion
	}
	return memberEpochCode(m, r.Generation)
}

// memberEpochCode is Apache's validateMemberEpoch: a classic member's
// generation that is not its epoch is ILLEGAL_GENERATION, a consumer
// member's STALE_MEMBER_EPOCH.
func memberEpochCode(m *ConsumerMember, epoch int32) int16 {
	switch {
	case epoch == m.Epoch:
		return 0
	case m.Classic != nil:
		return errIllegalGeneration
	}
	return errStaleMemberEpoch
}

// ValidateOffsetFetch is Apache's validateOffsetFetch: OffsetFetch v9
// may name a consumer group member and its epoch (a member id of nil and
// an epoch below 0 name none). A named member must exist with that epoch
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a
// classic member); classic groups check nothing.
func (g *Group) ValidateOffsetFetch(memberID *string, epoch int32) int16 {
	if g.cg == nil || g.state == Dead || (memberID == nil && epoch < 0) {
		return 0
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m := g.cg.members[id]
	if m == nil {
		return errUnknownMemberID
	}
	return memberEpochCode(m, epoch)
}
