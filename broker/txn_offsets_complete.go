package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/offsetwriter"
	"kaas/messages"
	"kaas/storage/offsetlog"
	"kaas/storage/slots"
)

// completeTxnOffsets is called by the transaction coordinator once it has
// decided a transaction that added offsets for groups (AddOffsetsToTxn):
// it writes a COMMIT or ABORT marker for producerID to each of the groups'
// offsets slots ("__consumer_offsets", slots.Of(group)) and, once durable,
// commits (or drops) the producer's staged offsets in every group of
// those slots (R-MRK-5). done gets 0, or the first error: an epoch below
// the one recorded on a slot gives INVALID_PRODUCER_EPOCH (R-MRK-4), a
// log that cannot be written KAFKA_STORAGE_ERROR.
func (b *Broker) completeTxnOffsets(producerID int64, epoch int16, commit bool, groupIDs []string, done func(errorCode int16)) {
	bySlot := map[int][]string{}
	for _, g := range groupIDs {
		s := slots.Of(g)
		bySlot[s] = append(bySlot[s], g)
	}
	kind := offsetlog.KindAbort
	if commit {
		kind = offsetlog.KindCommit
	}
	gc := b.groups()
	if gc == nil {
		done(kerr.NotCoordinator.Code) // handed off: the next owner finishes
		return
	}
	all := gatherFirstError(done)
	for slot, named := range bySlot {
		all.add()
		gc.offsets.Append(&offsetwriter.Append{Slot: slot, Entry: offsetlog.Entry{Kind: kind, ProducerID: producerID, Epoch: epoch}, Reply: func(r offsetwriter.Result) {
			if r.Code != 0 {
				b.log.Warn("transaction marker on an offsets slot failed", "slot", slot, "producer_id", producerID, "epoch", epoch, "commit", commit, "code", r.Code)
				all.fail(r.Code)
				return
			}
			// Tell every group that held staged offsets of the producer
			// (the log knows) plus the ones named, which may not have
			// reached the log yet only if their write failed.
			targets := map[string]bool{}
			for _, g := range r.Groups {
				targets[g] = true
			}
			for _, g := range named {
				targets[g] = true
			}
			groups := newGather(all.done)
			for g := range targets {
				groups.add()
				if b.sendToGroup(g, false, &messages.CompleteTxn{ProducerID: producerID, Commit: commit, Done: groups.done}) != routed {
					groups.done()
				}
			}
			groups.done()
		}})
	}
	all.done()
}
