package consumergroup

import (
	"sort"

	"kaas/model"
	"kaas/storage/offsetlog"
)

// CommitOffsets handles an OffsetCommit (Apache's doCommitOffsets); reply
// gets one code per partition once the commit is durable or rejected.
func (g *Group) CommitOffsets(r CommitRequest, reply func(map[model.TopicPartition]int16)) {
	if code := g.validateOffsetCommit(r, false); code != 0 {
		reply(allCodes(r.Offsets, code))
		return
	}
	switch g.state {
	case Empty:
		g.storeOffsets(r, false, reply)
	case Stable, PreparingRebalance:
		// Commits from the previous generation are still taken while
		// preparing; the heartbeat tells the member to rejoin.
		g.scheduleHeartbeat(g.members[r.MemberID])
		g.storeOffsets(r, false, reply)
	case CompletingRebalance:
		// A member with this generation has its JoinGroup answer but not
		// its assignment yet.
		reply(allCodes(r.Offsets, errRebalanceInProgress))
	default:
		g.log.Error("offset commit in an unexpected group state", "state", g.state)
		reply(allCodes(r.Offsets, errUnknownServerError))
	}
}

// CommitTxnOffsets handles a TxnOffsetCommit after verification
// (R-TXN-12, R-TXN-13): the offsets are staged under the producer id,
// invisible to OffsetFetch until CompleteTxn commits them.
func (g *Group) CommitTxnOffsets(r CommitRequest, reply func(map[model.TopicPartition]int16)) {
	if code := g.validateOffsetCommit(r, true); code != 0 {
		reply(allCodes(r.Offsets, code))
		return
	}
	g.storeOffsets(r, true, reply)
}

// validateOffsetCommit is Apache's validateOffsetCommit (R-TXN-12 for the
// transactional form).
func (g *Group) validateOffsetCommit(r CommitRequest, txn bool) int16 {
	if g.cg != nil && g.state != Dead {
		return g.validateConsumerCommit(r, txn)
	}
	switch {
	case g.state == Dead:
		return errCoordinatorNotAvailable
	case r.Generation < 0 && g.state == Empty:
		// Admin clients and consumers without group management.
		return 0
	case r.Generation >= 0 || r.MemberID != "" || r.InstanceID != nil:
		op := "offset-commit"
		if txn {
			op = "txn-offset-commit"
		}
		if code := g.validateCurrentMember(r.MemberID, r.InstanceID, op); code != 0 {
			return code
		}
		if r.Generation != g.generation {
			return errIllegalGeneration
		}
		return 0
	case !txn && g.state != Empty:
		// Only members commit to a non-empty group. Transactional
		// commits from old producers carry no member information.
		return errUnknownMemberID
	}
	return 0
}

func allCodes(offsets map[model.TopicPartition]Offset, code int16) map[model.TopicPartition]int16 {
	out := make(map[model.TopicPartition]int16, len(offsets))
	for tp := range offsets {
		out[tp] = code
	}
	return out
}

// storeOffsets writes the commit and, once durable, makes it visible (or,
// for a transaction, stages it). Offsets whose metadata is too long are
// dropped and answered OFFSET_METADATA_TOO_LARGE.
func (g *Group) storeOffsets(r CommitRequest, txn bool, reply func(map[model.TopicPartition]int16)) {
	if g.gotPlain && g.gotTxn {
		g.log.Warn("group receives offset commits from consumers and from transactional producers; mixing them usually surprises")
	}
	var tps []model.TopicPartition
	for tp, o := range r.Offsets {
		if len(o.Metadata) <= g.cfg.MaxMetadataSize {
			tps = append(tps, tp)
		}
	}
	if len(tps) == 0 {
		reply(allCodes(r.Offsets, errMetadataTooLarge))
		return
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	e := offsetlog.Entry{Kind: offsetlog.KindPlain, Records: make([]offsetlog.Record, 0, len(tps))}
	if txn {
		e.Kind, e.ProducerID, e.Epoch = offsetlog.KindTxn, r.ProducerID, r.ProducerEpoch
		g.gotTxn = true
	} else {
		g.gotPlain = true
	}
	var staged map[model.TopicPartition]Offset
	if txn {
		if staged = g.pendingTxn[r.ProducerID]; staged == nil {
			staged = map[model.TopicPartition]Offset{}
			g.pendingTxn[r.ProducerID] = staged
		}
	}
	for _, tp := range tps {
		o := r.Offsets[tp]
		o.Seq = 0
		if txn {
			staged[tp] = o
		} else {
			g.pendingCommits[tp] = o
		}
		e.Records = append(e.Records, offsetlog.OffsetRecord(g.id, tp, o))
	}
	g.persist(e, func(code int16, firstSeq uint64) {
		if g.state != Dead {
			for i, tp := range tps {
				o := r.Offsets[tp]
				o.Seq = 0
				switch {
				case code == 0 && txn:
					g.onTxnOffsetAppended(r.ProducerID, tp, o, firstSeq+uint64(i))
				case code == 0:
					g.onOffsetAppended(tp, o, firstSeq+uint64(i))
				case txn:
					g.failPendingTxnOffset(r.ProducerID, tp)
				default:
					if g.pendingCommits[tp] == o {
						delete(g.pendingCommits, tp)
					}
				}
			}
		}
		if code != 0 {
			g.log.Warn("offset commit failed to reach the log", "code", code, "transactional", txn)
			code = mapCommitError(code)
		}
		out := make(map[model.TopicPartition]int16, len(r.Offsets))
		for tp, o := range r.Offsets {
			if len(o.Metadata) > g.cfg.MaxMetadataSize {
				out[tp] = errMetadataTooLarge
			} else {
				out[tp] = code
			}
		}
		reply(out)
	})
}

// onOffsetAppended makes a durable plain commit the committed offset
// (unless an OffsetDelete removed it meanwhile) and clears it from the
// in-flight set if no later commit replaced it there.
func (g *Group) onOffsetAppended(tp model.TopicPartition, staged Offset, seq uint64) {
	if cur, ok := g.pendingCommits[tp]; ok {
		if old, ok := g.offsets[tp]; !ok || old.Seq < seq {
			o := staged
			o.Seq = seq
			g.offsets[tp] = o
		}
		if cur == staged {
			delete(g.pendingCommits, tp)
		}
	}
}

func (g *Group) onTxnOffsetAppended(pid int64, tp model.TopicPartition, staged Offset, seq uint64) {
	if p := g.pendingTxn[pid]; p != nil {
		if cur, ok := p[tp]; ok && cur == staged {
			staged.Seq = seq
			p[tp] = staged
		}
	}
}

func (g *Group) failPendingTxnOffset(pid int64, tp model.TopicPartition) {
	if p := g.pendingTxn[pid]; p != nil {
		delete(p, tp)
		if len(p) == 0 {
			delete(g.pendingTxn, pid)
		}
	}
}

// HasPendingTxn reports whether producerID has staged offsets here.
func (g *Group) HasPendingTxn(producerID int64) bool {
	_, ok := g.pendingTxn[producerID]
	return ok
}

// CompleteTxn applies a transaction marker for producerID that reached
// the slot log: a commit makes its staged offsets committed (where not
// older than the committed ones), an abort drops them.
func (g *Group) CompleteTxn(producerID int64, commit bool) {
	staged, ok := g.pendingTxn[producerID]
	if !ok {
		return
	}
	delete(g.pendingTxn, producerID)
	if !commit || g.state == Dead {
		return
	}
	written := make(map[model.TopicPartition]Offset, len(staged))
	for tp, o := range staged {
		if o.Seq == 0 {
			// Apache throws: the marker overtook the offset write.
			g.log.Error("transaction committed before its offset commit was written; dropping it", "producer_id", producerID, "topic", tp.Topic, "partition", tp.Partition)
			continue
		}
		written[tp] = o
	}
	offsetlog.MaterializeInto(g.offsets, written)
}

// FetchOffsets answers OffsetFetch for tps, or for every committed
// partition when tps is nil. With requireStable a partition with a commit
// in flight or staged by a transaction answers UNSTABLE_OFFSET_COMMIT
// (R-RC-6).
func (g *Group) FetchOffsets(tps []model.TopicPartition, requireStable bool) []FetchedOffset {
	if g.state == Dead {
		return unknownOffsets(tps)
	}
	if tps == nil {
		tps = offsetlog.SortedTPs(g.offsets)
	}
	out := make([]FetchedOffset, 0, len(tps))
	for _, tp := range tps {
		f := FetchedOffset{TP: tp, Offset: -1, LeaderEpoch: -1}
		if requireStable && g.hasPendingFor(tp) {
			f.Err = errUnstableOffsetCommit
		} else if o, ok := g.offsets[tp]; ok {
			f.Offset, f.LeaderEpoch, f.Metadata = o.Offset, o.LeaderEpoch, o.Metadata
		}
		out = append(out, f)
	}
	return out
}

// UnknownOffsets is the OffsetFetch answer of a group that does not exist.
func UnknownOffsets(tps []model.TopicPartition) []FetchedOffset { return unknownOffsets(tps) }

func unknownOffsets(tps []model.TopicPartition) []FetchedOffset {
	out := make([]FetchedOffset, 0, len(tps))
	for _, tp := range tps {
		out = append(out, FetchedOffset{TP: tp, Offset: -1, LeaderEpoch: -1})
	}
	return out
}

func (g *Group) hasPendingFor(tp model.TopicPartition) bool {
	if _, ok := g.pendingCommits[tp]; ok {
		return true
	}
	for _, staged := range g.pendingTxn {
		if _, ok := staged[tp]; ok {
			return true
		}
	}
	return false
}

func (g *Group) hasOffsets() bool {
	return len(g.offsets) > 0 || len(g.pendingCommits) > 0 || len(g.pendingTxn) > 0
}

// removeOffsets drops the committed (and any in-flight or staged) offsets
// of tps, returning the partitions that had a committed offset.
func (g *Group) removeOffsets(tps []model.TopicPartition) []model.TopicPartition {
	var removed []model.TopicPartition
	for _, tp := range tps {
		delete(g.pendingCommits, tp)
		for _, staged := range g.pendingTxn {
			delete(staged, tp)
		}
		if _, ok := g.offsets[tp]; ok {
			delete(g.offsets, tp)
			removed = append(removed, tp)
		}
	}
	return removed
}

// cleanup is Apache's cleanupGroupMetadata for one group: after offsets
// were removed, an Empty group without offsets dies; tombstones for the
// removed offsets (and the group's metadata, if it ever had a generation)
// are written, and done runs once they are durable (or failed: the
// writer's code).
func (g *Group) cleanup(removed []model.TopicPartition, done func(code int16)) {
	g.removals++
	if g.isEmpty() && !g.hasOffsets() {
		g.log.Info("group transitioned to Dead", "generation", g.generation)
		g.transition(Dead)
	}
	e := offsetlog.Entry{Kind: offsetlog.KindPlain}
	for _, tp := range removed {
		e.Records = append(e.Records, offsetlog.OffsetTombstone(g.id, tp))
	}
	switch {
	case g.state == Dead && g.cg != nil:
		e.Records = append(e.Records, g.consumerTombstones()...)
	case g.state == Dead && g.generation > 0:
		e.Records = append(e.Records, offsetlog.GroupTombstone(g.id))
	}
	if len(e.Records) == 0 {
		done(0)
		return
	}
	g.persist(e, func(code int16, _ uint64) { done(code) })
}

// Delete handles DeleteGroups for this group: only an Empty group can be
// deleted; it goes Dead with all its offsets. done gets the group's code
// once the tombstones are durable; if they fail, the writer's code
// (mapped as Apache's handleOperationException maps it: NOT_COORDINATOR
// for a storage error or a lease in doubt) and the group is restored.
func (g *Group) Delete(done func(code int16)) {
	switch {
	case g.state == Dead:
		done(errGroupIDNotFound)
		return
	case !g.isEmpty():
		done(errNonEmptyGroup)
		return
	}
	tps := offsetlog.SortedTPs(g.offsets)
	before := g.beforeRemoving(tps)
	g.transition(Dead)
	removed := g.removeOffsets(tps)
	g.log.Info("group deleted", "offsets_removed", len(removed))
	g.cleanup(removed, func(code int16) {
		if code != 0 {
			g.log.Warn("tombstones for a deleted group failed to reach the log; the group is kept", "code", code)
			g.undo(before)
		}
		done(mapStoreError(code))
	})
}

// DeleteOffsets handles OffsetDelete: a group-level code, or per-partition
// codes (GROUP_SUBSCRIBED_TO_TOPIC for topics a live consumer group
// reads). done runs once the tombstones are durable; if they fail, with
// the writer's code at the group level (as Delete) and the offsets
// restored.
func (g *Group) DeleteOffsets(tps []model.TopicPartition, done func(groupCode int16, codes map[model.TopicPartition]int16)) {
	codes := map[model.TopicPartition]int16{}
	var eligible []model.TopicPartition
	switch {
	case g.state == Dead:
		done(errGroupIDNotFound, nil)
		return
	case g.cg == nil && g.state == Empty:
		eligible = tps
	case g.protocolType == ConsumerProtocolType:
		for _, tp := range tps {
			if g.isSubscribedTo(tp.Topic) {
				codes[tp] = errSubscribedToTopic
			} else {
				eligible = append(eligible, tp)
			}
		}
	default:
		done(errNonEmptyGroup, nil)
		return
	}
	if len(eligible) == 0 {
		done(0, codes)
		return
	}
	before := g.beforeRemoving(eligible)
	removed := g.removeOffsets(eligible)
	for _, tp := range eligible {
		codes[tp] = 0
	}
	g.log.Info("offsets deleted", "partitions", len(eligible), "offsets_removed", len(removed))
	g.cleanup(removed, func(code int16) {
		if code != 0 {
			g.log.Warn("offset tombstones failed to reach the log; the offsets are kept", "code", code)
			g.undo(before)
			done(mapStoreError(code), nil)
			return
		}
		done(0, codes)
	})
}

// RemovePartitions drops the offsets of partitions whose topic was
// deleted (Apache's handleDeletedPartitions); an Empty group left without
// offsets goes Dead.
func (g *Group) RemovePartitions(tps []model.TopicPartition) {
	if g.state == Dead {
		return
	}
	removed := g.removeOffsets(tps)
	if len(removed) == 0 && !(g.isEmpty() && !g.hasOffsets()) {
		return
	}
	g.log.Info("removed offsets of a deleted topic", "partitions", len(removed))
	g.cleanup(removed, func(code int16) {
		if code != 0 {
			g.log.Warn("tombstones for a deleted topic's offsets failed to reach the log", "code", code)
		}
	})
}

// ExpireOffsets removes offsets past offsets.retention.minutes (Apache's
// removeExpiredOffsets and the cleanup that follows); an Empty group left
// without offsets goes Dead.
func (g *Group) ExpireOffsets(done func()) {
	if g.state == Dead {
		done()
		return
	}
	now := g.nowMs()
	retention := g.cfg.OffsetsRetention.Milliseconds()
	expired := func(base func(Offset) int64, skipSubscribed bool) []model.TopicPartition {
		var out []model.TopicPartition
		for _, tp := range offsetlog.SortedTPs(g.offsets) {
			o := g.offsets[tp]
			if skipSubscribed && g.isSubscribedTo(tp.Topic) {
				continue
			}
			if _, inFlight := g.pendingCommits[tp]; inFlight {
				continue
			}
			if o.ExpireTimestamp >= 0 {
				if now >= o.ExpireTimestamp {
					out = append(out, tp)
				}
			} else if now-base(o) >= retention {
				out = append(out, tp)
			}
		}
		return out
	}
	commitTime := func(o Offset) int64 { return o.CommitTimestamp }
	var gone []model.TopicPartition
	switch {
	case g.cg != nil:
		// Consumer groups: offsets of topics no member reads expire
		// from their commit time, whatever the group's state.
		gone = expired(commitTime, true)
	case g.protocolType != "" && g.state == Empty:
		// Retention runs from when the group became empty.
		gone = expired(func(o Offset) int64 {
			if g.stateTimeMs >= 0 {
				return g.stateTimeMs
			}
			return o.CommitTimestamp
		}, false)
	case g.protocolType == ConsumerProtocolType && g.subscribed != nil && g.state == Stable:
		gone = expired(commitTime, true)
	case g.protocolType == "":
		// Offsets-only groups (no group management).
		gone = expired(commitTime, false)
	}
	for _, tp := range gone {
		delete(g.offsets, tp)
	}
	if len(gone) > 0 {
		g.log.Info("expired offsets", "partitions", len(gone))
	}
	if len(gone) == 0 && !(g.isEmpty() && !g.hasOffsets()) {
		done()
		return
	}
	g.cleanup(gone, func(code int16) {
		if code != 0 {
			g.log.Warn("tombstones for expired offsets failed to reach the log", "code", code)
		}
		done()
	})
}
