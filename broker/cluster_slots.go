package broker

// Coordinator slots as ownership units (cluster mode). Each of the 50
// transaction-state slots (unit t/<n>, Apache's __transaction_state
// partition n) and the 50 group-offsets slots (g/<n>, __consumer_offsets
// partition n) has its own owner key and is balanced over the live
// brokers by rendezvous hashing like a partition, so a transaction's
// coordinator and its groups' coordinator may be different brokers, as in
// Apache: the transaction coordinator writes its group markers to the
// offsets slot's owner as WriteTxnMarkers for __consumer_offsets
// partition n (txn_offsets_complete.go), and the group coordinator asks
// the transaction coordinator to verify a TxnOffsetCommit
// (txn_offset_verify.go).
//
// Opening a slot is what a restart does for it alone; the slot's file is
// first sealed against its previous owner (storage/slotlog generations).
// Closing one stops routing to it, answers what is parked on it
// NOT_COORDINATOR (group calls) or COORDINATOR_NOT_AVAILABLE (held
// transactional requests), makes every accepted write durable and closes
// the file.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/group"
	"kaas/actors/system"
	"kaas/coord"
	"kaas/messages"
	"kaas/model/slots"
	"kaas/state/ownership"
	"kaas/storage/slotlog"
)

var errCoordinatorsStopped = errors.New("the coordinators are stopped")

// parseSlotUnit splits a coordinator slot's unit: txn true for a
// transaction-state slot, false for a group-offsets slot.
func parseSlotUnit(unit string) (txn bool, n int, ok bool) {
	return ownership.ParseSlotUnit(unit, slots.Count)
}

// slotTakeover is the owner of slot n at epoch as the slot's file sees it
// (slotlog.Adopt): the file generation it writes (the owner key's epoch
// starts at 0, generations at 1), and the slot's lease gate, asked before
// every write of the takeover.
func (b *Broker) slotTakeover(kind, n int, epoch int32) slotlog.Owner {
	return slotlog.Owner{Gen: int64(epoch) + 1, MayAct: func() bool { return b.slotAlive(kind, n) }}
}

// openSlotUnit takes a claimed coordinator slot over; its writes are
// acknowledged only while lease, the one it was claimed under, is
// certainly alive (slotAlive).
func (b *Broker) openSlotUnit(txn bool, n int, epoch int32, lease coord.LeaseID) error {
	co := b.coordinating()
	if co == nil {
		return errCoordinatorsStopped
	}
	kind := offsetsSlots
	if txn {
		kind = txnSlots
	}
	b.slotLease[kind][n].Store(int64(lease))
	if txn {
		if err := co.writer.OpenSlot(n, b.slotTakeover(txnSlots, n, epoch)); err != nil {
			return err
		}
		co.txnOwned[n].Store(true)
		co.txns.StartSlot(n)
		return nil
	}
	gc := co.groups
	loaded, err := gc.offsets.OpenSlot(n, b.slotTakeover(offsetsSlots, n, epoch))
	if err != nil {
		return err
	}
	if err := b.loadGroups(gc, loaded); err != nil {
		gc.pool.StopWhere(inSlot(n))
		return errors.Join(err, gc.offsets.CloseSlot(n))
	}
	co.groupOwned[n].Store(true)
	return nil
}

// closeSlotUnit hands a coordinator slot back. Every write to it was
// fsynced before it was answered, and none starts once the lease is in
// doubt (the transaction and offsets writers' gates), so closing writes
// nothing new; an error means an accepted write could not be made
// durable.
func (b *Broker) closeSlotUnit(txn bool, n int) error {
	co := b.coordinating()
	if co == nil {
		return nil
	}
	if txn {
		co.txnOwned[n].Store(false)
		err := co.writer.CloseSlot(n)
		co.txns.StopSlot(n)
		b.slotLease[txnSlots][n].Store(0)
		return err
	}
	co.groupOwned[n].Store(false)
	if b.shares != nil {
		b.shares.UnloadMembers(inSlot(n))
	}
	gc := co.groups
	var parked []*group.Handle
	for _, h := range gc.pool.Live() {
		if slots.Of(h.ID) == n {
			parked = append(parked, h)
		}
	}
	unloadAll(parked)
	err := gc.offsets.CloseSlot(n) // answers the appends still waiting
	// Once the groups have taken those answers (their mailboxes are
	// FIFO), nothing is left for them to reply to: stop them. Anything
	// sent to them later is answered NOT_COORDINATOR (messages'
	// NotLeader, as a dead letter).
	unloadAll(parked)
	gc.pool.StopWhere(inSlot(n))
	b.slotLease[offsetsSlots][n].Store(0)
	return err
}

func inSlot(n int) func(string) bool { return func(id string) bool { return slots.Of(id) == n } }

// unloadAll unloads the groups and waits until each has: every parked
// JoinGroup and SyncGroup is answered NOT_COORDINATOR (Apache's
// onGroupUnloaded), so members find the new coordinator at once.
func unloadAll(hs []*group.Handle) {
	unloaded := make(chan struct{})
	g := newGather(func() { close(unloaded) })
	for _, h := range hs {
		g.add()
		h.Send(&messages.UnloadGroup{Done: g.done})
	}
	g.done()
	_, _ = system.Await(context.Background(), unloaded)
}

// slotOwner is the broker holding unit's owner key, from the cluster view.
func (b *Broker) slotOwner(unit string) (int32, bool) {
	v := b.view()
	if v == nil {
		return -1, false
	}
	o, ok := v.Owners[unit]
	return o.Broker, ok
}

// slotStatus is the answer for a request whose coordinator slot unit is
// not served here (open false): COORDINATOR_LOAD_IN_PROGRESS while this
// broker holds its key but is still opening it, else NOT_COORDINATOR.
func (b *Broker) slotStatus(unit string, open bool) int16 {
	switch {
	case open:
		return 0
	case b.cluster != nil:
		if o, ok := b.slotOwner(unit); ok && o == b.cfg.BrokerID {
			return kerr.CoordinatorLoadInProgress.Code
		}
	}
	return kerr.NotCoordinator.Code
}

// internalSlotUnit is the coordinator slot behind an internal topic's
// partition (__consumer_offsets n, __transaction_state n).
func internalSlotUnit(topic string, p int32) (string, bool) {
	switch topic {
	case consumerOffsetsTopic:
		return ownership.OffsetsSlotUnit(int(p)), true
	case transactionStateTopic:
		return ownership.TxnSlotUnit(int(p)), true
	}
	return "", false
}

// SlotCounts is how many coordinator slots of each kind one broker owns.
type SlotCounts struct {
	Txn     int `json:"txn"`
	Offsets int `json:"offsets"`
}

// coordinatorSlots counts the coordinator slots each broker owns, from
// the cluster view (the cluster panel, /api/cluster).
func (b *Broker) coordinatorSlots() map[int32]SlotCounts {
	out := map[int32]SlotCounts{}
	v := b.view()
	if v == nil {
		return out
	}
	for unit, o := range v.Owners {
		txn, _, ok := parseSlotUnit(unit)
		if !ok {
			continue
		}
		c := out[o.Broker]
		if txn {
			c.Txn++
		} else {
			c.Offsets++
		}
		out[o.Broker] = c
	}
	return out
}
