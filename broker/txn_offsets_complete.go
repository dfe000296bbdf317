package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/offsetwriter"
	"kaas/messages"
	"kaas/model"
	"kaas/model/slots"
	"kaas/storage/offsetlog"
)

// completeTxnOffsets is called by the transaction coordinator once it has
// decided a transaction that added offsets for groups (AddOffsetsToTxn,
// or TxnOffsetCommit v5's implicit add, which may name only the slot):
// it writes a COMMIT or ABORT marker for producerID to each of the groups'
// offsets slots ("__consumer_offsets", slots.Of(group)) and, once durable,
// commits (or drops) the producer's staged offsets in every group of
// those slots (R-MRK-5). A slot another broker owns gets the marker as
// WriteTxnMarkers for __consumer_offsets partition n, as Apache's
// coordinator sends it to the partition's leader. done gets 0, or the
// first error (the coordinator retries the whole group marker after its
// backoff; a marker written twice changes nothing): an epoch below the one
// recorded on a slot gives INVALID_PRODUCER_EPOCH (R-MRK-4), a log that
// cannot be written KAFKA_STORAGE_ERROR, a slot between owners
// NOT_LEADER_OR_FOLLOWER.
func (b *Broker) completeTxnOffsets(producerID int64, epoch int16, commit bool, groupIDs []string, offsetSlots []int32, done func(errorCode int16)) {
	bySlot := map[int][]string{}
	for _, g := range groupIDs {
		s := slots.Of(g)
		bySlot[s] = append(bySlot[s], g)
	}
	// Slots a TV2 TxnOffsetCommit added through a peer, without its group
	// (R-TV2-6): the slot's log knows which groups hold staged offsets.
	for _, s := range offsetSlots {
		if _, ok := bySlot[int(s)]; !ok {
			bySlot[int(s)] = nil
		}
	}
	co := b.coordinating()
	if co == nil {
		done(kerr.NotCoordinator.Code) // stopping: the next owner finishes
		return
	}
	all := gatherFirstError(done)
	for slot, named := range bySlot {
		all.add()
		reply := func(code int16) {
			if code != 0 {
				b.log.Warn("transaction marker on an offsets slot failed", "slot", slot, "producer_id", producerID, "epoch", epoch, "commit", commit, "code", code)
				all.fail(code)
				return
			}
			all.done()
		}
		if co.groupOwned[slot].Load() {
			b.markOffsetsSlot(slot, producerID, epoch, commit, named, reply)
			continue
		}
		if b.peers == nil {
			reply(kerr.NotCoordinator.Code)
			continue
		}
		b.peers.WriteMarker(model.TopicPartition{Topic: consumerOffsetsTopic, Partition: int32(slot)}, &messages.WriteMarker{
			ProducerID: producerID, ProducerEpoch: epoch, Commit: commit, Reply: reply,
		})
	}
	all.done()
}

// markOffsetsSlot appends a COMMIT or ABORT marker for producerID to
// offsets slot n, open here, and once durable completes the producer's
// staged offsets in every group of the slot that held some (the log
// knows) plus the ones named, which may not have reached the log yet
// only if their write failed. done gets 0 or the marker's error.
func (b *Broker) markOffsetsSlot(n int, producerID int64, epoch int16, commit bool, named []string, done func(code int16)) {
	gc := b.groups()
	if gc == nil {
		done(kerr.NotCoordinator.Code)
		return
	}
	kind := offsetlog.KindAbort
	if commit {
		kind = offsetlog.KindCommit
	}
	gc.offsets.Append(&offsetwriter.Append{Slot: n, Entry: offsetlog.Entry{Kind: kind, ProducerID: producerID, Epoch: epoch}, Reply: func(r offsetwriter.Result) {
		if r.Code != 0 && !r.Durable {
			done(r.Code)
			return
		}
		// A marker that reached the log completes the groups in memory
		// even when it is refused (the lease fell in doubt during its
		// fsync): the slot's state has already dropped the producer's
		// staged offsets, so the coordinator's retry finds no group to
		// complete, and without this the groups kept them staged for
		// ever (UNSTABLE_OFFSET_COMMIT to every consumer, and committed
		// offsets that lag the log's). The coordinator still gets r.Code,
		// and retries.
		targets := map[string]bool{}
		for _, g := range r.Groups {
			targets[g] = true
		}
		for _, g := range named {
			targets[g] = true
		}
		groups := newGather(func() { done(r.Code) })
		for g := range targets {
			groups.add()
			if b.sendToGroup(g, false, &messages.CompleteTxn{ProducerID: producerID, Commit: commit, Done: groups.done}) != routed {
				groups.done()
			}
		}
		groups.done()
	}})
}

// writeOffsetsMarker is a peer coordinator's marker for
// __consumer_offsets partition n (WriteTxnMarkers): written to the slot
// if this broker serves it, else NOT_LEADER_OR_FOLLOWER, which the
// coordinator retries at the slot's next owner.
func (b *Broker) writeOffsetsMarker(n int32, producerID int64, epoch int16, commit bool, done func(code int16)) {
	co := b.coordinating()
	if n < 0 || n >= slots.Count {
		done(kerr.UnknownTopicOrPartition.Code)
		return
	}
	if co == nil || !co.groupOwned[n].Load() {
		done(kerr.NotLeaderForPartition.Code)
		return
	}
	b.markOffsetsSlot(int(n), producerID, epoch, commit, nil, done)
}
