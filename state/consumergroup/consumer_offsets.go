package consumergroup

import "fmt"

// validateConsumerCommit is Apache's ConsumerGroup.validateOffsetCommit
// for OffsetCommit and TxnOffsetCommit: without a member (epoch < 0) only
// an empty group takes commits; a member must exist, commit with
// OffsetCommit v9+ (KIP-848) unless transactional, and give its current
// epoch, else STALE_MEMBER_EPOCH.
func (g *Group) validateConsumerCommit(r CommitRequest, txn bool) int16 {
	cg := g.cg
	if r.Generation < 0 && cg.isEmpty() {
		return 0
	}
	m := cg.members[r.MemberID]
	if m == nil {
		return errUnknownMemberID
	}
	if !txn && r.Version < 9 {
		g.log.Info("OffsetCommit below v9 from a consumer group member", "member", r.MemberID, "version", r.Version)
		return errUnsupportedVersion
	}
	if r.Generation != m.Epoch {
		g.log.Debug(fmt.Sprintf("The received member epoch %d does not match the expected member epoch %d.", r.Generation, m.Epoch), "member", r.MemberID)
		return errStaleMemberEpoch
	}
	return 0
}

// ValidateOffsetFetch is Apache's validateOffsetFetch: OffsetFetch v9
// may name a consumer group member and its epoch (a member id of nil and
// an epoch below 0 name none). A named member must exist with that epoch
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); classic groups check nothing.
func (g *Group) ValidateOffsetFetch(memberID *string, epoch int32) int16 {
	if g.cg == nil || g.state == Dead || (memberID == nil && epoch < 0) {
		return 0
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m := g.cg.members[id]
	switch {
	case m == nil:
		return errUnknownMemberID
	case m.Epoch != epoch:
		return errStaleMemberEpoch
	}
	return 0
}
