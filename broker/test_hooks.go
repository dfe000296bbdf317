package broker

import (
	"kaas/model"
)

// testHooks lets package-internal tests steer the few things a scenario
// must control and a real client cannot: when the coordinator's markers
// reach their partitions, which coordinator slots this broker owns, and
// when a slot's or a partition's lease is in doubt.
// Test-only: production never sets Config.testHooks, and every hook is
// optional.
type testHooks struct {
	// holdMarker is offered every marker the transaction coordinator
	// sends to a local partition. Returning true means the hook keeps it
	// and calls deliver later (or never); false delivers it at once.
	holdMarker func(tp model.TopicPartition, deliver func()) bool
	// foreignSlot reports a coordinator slot as owned by a peer broker.
	foreignSlot func(slot int) bool
	// leaseInDoubt reports coordinator slot n of kind (txnSlots,
	// offsetsSlots) as one whose lease is not certainly alive: it may
	// neither write nor acknowledge (slotAlive).
	leaseInDoubt func(kind, n int) bool
	// partitionInDoubt reports a partition of a single broker as one
	// whose lease is not certainly alive: its Gate is closed while it
	// says so (partitionGate).
	partitionInDoubt func(tp model.TopicPartition) bool
}
