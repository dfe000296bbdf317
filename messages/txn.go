package messages

import (
	"time"

	"kaas/model"
)

// InitProducerID is the transactional path of InitProducerId, for the
// transactional id's actor (spec R-IPI-6..14). The handler has already
// checked the claim's shape, the id and the timeout.
type InitProducerID struct {
	TimeoutMs     int32
	HasClaim      bool
	ProducerID    int64
	ProducerEpoch int16
	Reply         func(code int16, producerID int64, epoch int16)
}

// Fail answers an InitProducerID whose handling panicked.
func (m *InitProducerID) Fail(any) { m.Reply(-1, -1, -1) }

// AddPartitionsToTxn adds partitions to the ongoing transaction (R-TXN-4)
// or, with VerifyOnly, reports which are in it (R-TXN-5).
type AddPartitionsToTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []model.TopicPartition
	VerifyOnly    bool
	// TV2: the implicit add of a TV2 Produce (v12+) or TxnOffsetCommit
	// (v5+), by the partition's leader or the group's coordinator.
	TV2 bool
	// Deadline (zero: none) is the request's own deadline for a wait for
	// markers (R-TXN-2): the Produce v12 whose partition this implicit add
	// is for has its timeout, from its arrival; an add in the
	// brokers' v4+ form a short one, as a leader sends one such request
	// at a time to a coordinator and one wait holds back every add behind it.
	Deadline time.Time
	// Reply gets a transaction-level code, or 0 and one code per partition
	// (in request order).
	Reply func(code int16, perPartition []int16)
}

// Fail answers an AddPartitionsToTxn whose handling panicked.
func (m *AddPartitionsToTxn) Fail(any) { m.Reply(-1, nil) }

// AddOffsetsToTxn adds a group's offsets partition to the transaction
// (R-TXN-6).
type AddOffsetsToTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	Group         string
	TV2           bool // TxnOffsetCommit v5+'s implicit add
	Reply         func(code int16)
}

// Fail answers an AddOffsetsToTxn whose handling panicked.
func (m *AddOffsetsToTxn) Fail(any) { m.Reply(-1) }

// EndTxn commits or aborts the ongoing transaction (R-TXN-7; R-TV2-2..4
// with TV2). Reply gets the producer id and epoch to go on with (EndTxn
// v5), -1 with an error.
type EndTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	Commit        bool
	TV2           bool
	Reply         func(code int16, producerID int64, epoch int16)
}

// Fail answers an EndTxn whose handling panicked.
func (m *EndTxn) Fail(any) { m.Reply(-1, -1, -1) }

// notCoordinator is NOT_COORDINATOR: the answer for a transactional
// request whose coordinator stopped while it was on its way (a cluster
// broker handed the coordinator slots off); the client finds the new one.
const notCoordinator = 16

// NotLeader answers a request its actor can no longer take
// (system.Undeliverable).
func (m *InitProducerID) NotLeader() { m.Reply(notCoordinator, -1, -1) }

// NotLeader answers as InitProducerID.NotLeader.
func (m *AddPartitionsToTxn) NotLeader() { m.Reply(notCoordinator, nil) }

// NotLeader answers as InitProducerID.NotLeader.
func (m *AddOffsetsToTxn) NotLeader() { m.Reply(notCoordinator) }

// NotLeader answers as InitProducerID.NotLeader.
func (m *EndTxn) NotLeader() { m.Reply(notCoordinator, -1, -1) }
