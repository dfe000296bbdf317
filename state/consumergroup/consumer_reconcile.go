package consumergroup

// reconcile is Apache 4.0's CurrentAssignmentBuilder: it moves a member
// towards its target assignment without ever letting two members hold a
// partition at once. A member first revokes what it must give up (and
// stays at its epoch until it reports those partitions gone); it then
// moves to the target epoch, taking the partitions of its target that no
// other member holds any more; partitions still held elsewhere wait
// (UNRELEASED_PARTITIONS) until their owner has revoked them. owned is
// what the member reported in this heartbeat (nil: not reported). It
// returns the member itself when nothing changes, else a new version.
func (cg *consumerGroup) reconcile(m *ConsumerMember, targetEpoch int32, target Assignment, owned Assignment, ownedKnown bool) (*ConsumerMember, error) {
	b := reconciler{cg: cg, m: m, targetEpoch: targetEpoch, target: target, owned: owned, ownedKnown: ownedKnown}
	switch m.State {
	case MemberStable:
		if m.Epoch != targetEpoch {
			return b.computeNext(m.Epoch, m.Assigned), nil
		}
		return m, nil
	case MemberUnrevokedPartitions:
		if b.ownsRevoked(m.PendingRevocation) {
			return m, nil
		}
		return b.computeNext(m.Epoch+1, m.Assigned), nil
	case MemberUnreleasedPartitions:
		return b.computeNext(m.Epoch, m.Assigned), nil
	default: // MemberUnknown: a state from a newer version
		if !ownedKnown || len(owned) > 0 {
			return nil, errUnknownMemberState
		}
		return b.computeNext(targetEpoch, m.Assigned), nil
	}
}

type reconciler struct {
	cg          *consumerGroup
	m           *ConsumerMember
	targetEpoch int32
	target      Assignment
	owned       Assignment
	ownedKnown  bool
}

// errUnknownMemberState fences a member whose stored state this version
// does not know: it must rejoin without partitions.
var errUnknownMemberState = errorString("The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")

type errorString string

func (e errorString) Error() string { return string(e) }

// ownsRevoked reports whether the member still reports one of the
// partitions it must revoke; not reporting counts as still owning.
func (b *reconciler) ownsRevoked(revoking Assignment) bool {
	if !b.ownedKnown {
		return true
	}
	for id, ps := range b.owned {
		for _, p := range ps {
			if revoking.has(id, p) {
				return true
			}
		}
	}
	return false
}

// computeNext splits the member's partitions against the target: kept,
// to revoke, to assign (when free), and picks the next state.
func (b *reconciler) computeNext(epoch int32, assigned Assignment) *ConsumerMember {
	newAssigned, revoking, assigning := Assignment{}, Assignment{}, Assignment{}
	unreleased := false
	ids := map[TopicID]bool{}
	for id := range b.target {
		ids[id] = true
	}
	for id := range assigned {
		ids[id] = true
	}
	for id := range ids {
		target, current := b.target[id], assigned[id]
		for _, p := range current {
			if b.target.has(id, p) {
				newAssigned.add(id, p)
			} else {
				revoking.add(id, p)
			}
		}
		for _, p := range target {
			if newAssigned.has(id, p) {
				continue
			}
			if b.cg.currentPartitionEpoch(id, p) != -1 {
				unreleased = true
				continue
			}
			assigning.add(id, p)
		}
	}
	next := b.m.copyMember()
	// Apache's updateMemberEpoch: the previous epoch is always the one
	// the member had, even when it does not change.
	setEpoch := func(e int32) { next.PreviousEpoch, next.Epoch = next.Epoch, e }
	switch {
	case len(revoking) > 0 && b.ownsRevoked(revoking):
		next.State = MemberUnrevokedPartitions
		setEpoch(epoch)
		next.Assigned, next.PendingRevocation = newAssigned, revoking
	case len(assigning) > 0:
		for id, ps := range assigning {
			for _, p := range ps {
				newAssigned.add(id, p)
			}
		}
		next.State = MemberStable
		if unreleased {
			next.State = MemberUnreleasedPartitions
		}
		setEpoch(b.targetEpoch)
		next.Assigned, next.PendingRevocation = newAssigned, Assignment{}
	default:
		next.State = MemberStable
		if unreleased {
			next.State = MemberUnreleasedPartitions
		}
		setEpoch(b.targetEpoch)
		next.Assigned, next.PendingRevocation = newAssigned, Assignment{}
	}
	return next
}
