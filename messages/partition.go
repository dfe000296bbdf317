package messages

import "kaas/storage/partlog"

// Produce asks a partition actor to validate and append one record batch.
// The actor owns Batch from now on (its base offset is rewritten in place).
type Produce struct {
	Batch           []byte
	Acks            int16
	TransactionalID *string
	// Verified: the transaction's coordinator (a peer broker) confirmed
	// the partition is in the producer's ongoing transaction when the
	// partition's marker generation was VerifiedGen (partition.VerifyRemotely).
	Verified    bool
	VerifiedGen uint64
	// VerifyCode, set with Verified, is the coordinator's refusal: the
	// batch comes back to the actor only to be answered with it, in its
	// turn (the producer's later batches wait behind it, held).
	VerifyCode int16
	// AddToTxn: a TV2 produce (v12+): a transactional batch for a
	// partition not yet in the producer's transaction adds it there, the
	// partition's leader asking the coordinator (partition.VerifyRemotely,
	// R-TV2-5), instead of being refused.
	AddToTxn bool
	// AwaitedMarker: the batch has waited once for its producer's
	// previous transaction's marker on the partition, in vain; it is not
	// made to wait again (partition/produce_await.go).
	AwaitedMarker bool
	// Reply is called exactly once, from the actor or from the goroutine
	// that completed the fsync covering the batch.
	Reply func(ProduceResult)
}

// ProduceResult is one partition's produce answer.
type ProduceResult struct {
	ErrorCode      int16
	ErrorMessage   string
	BaseOffset     int64
	LogAppendTime  int64
	LogStartOffset int64
	// MarkerGen comes with partition.VerifyRemotely (never to a client).
	MarkerGen uint64
}

// Fail answers a Produce whose handling panicked.
func (p *Produce) Fail(any) {
	p.Reply(ProduceResult{ErrorCode: -1, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1, ErrorMessage: "internal error"})
}

// notLeader is NOT_LEADER_OR_FOLLOWER: the answer for a partition this
// broker no longer leads (its actor was retired or is gone).
const notLeader = 6

// NotLeader answers a Produce for a partition this broker stopped leading
// while the request was on its way.
func (p *Produce) NotLeader() {
	p.Reply(ProduceResult{ErrorCode: notLeader, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1})
}

// NotLeader answers a marker sent to a partition this broker stopped
// leading: the coordinator retries it at the current leader.
func (w *WriteMarker) NotLeader() { w.Reply(notLeader) }

// NotLeader answers a DeleteRecords for a partition no longer led here.
func (d *DeleteRecords) NotLeader() {
	d.Reply(DeleteRecordsResult{ErrorCode: notLeader, LowWatermark: -1})
}

// NotLeader answers with no producers.
func (d *DescribeProducers) NotLeader() { d.Reply(nil) }

// DeleteRecords moves the partition's log start offset (DeleteRecords API).
// Offset -1 means the high watermark.
type DeleteRecords struct {
	Offset int64
	Reply  func(DeleteRecordsResult)
}

// DeleteRecordsResult is the new low watermark or an error.
type DeleteRecordsResult struct {
	ErrorCode    int16
	LowWatermark int64
}

// Fail answers a DeleteRecords whose handling panicked.
func (d *DeleteRecords) Fail(any) { d.Reply(DeleteRecordsResult{ErrorCode: -1, LowWatermark: -1}) }

// WriteMarker appends a transaction marker (COMMIT or ABORT) for a producer
// and answers once it is durable.
type WriteMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	Reply            func(errorCode int16)
}

// Fail answers a WriteMarker whose handling panicked.
func (w *WriteMarker) Fail(any) { w.Reply(-1) }

// UpdateConfig applies changed topic configs to a partition.
type UpdateConfig struct {
	Log               partlog.Config
	MaxMessageBytes   int32
	LogAppendTime     bool  // message.timestamp.type=LogAppendTime
	MinInsyncReplicas int32 // min.insync.replicas
}

// Tick drives a partition's periodic work (retention, segment.ms, producer
// expiry, snapshots); the actor system sends it on the partition's own
// timer (system.Every).
type Tick struct{}

// Checkpoint asks a partition to move its recovery point up to what is
// fsynced (every minute: Apache's log.flush.offset.checkpoint.interval.ms),
// so a restart after a crash scans only what was written since.
type Checkpoint struct{}

// DescribeProducers asks a partition for its active producers
// (DescribeProducers API).
type DescribeProducers struct {
	Reply func([]ActiveProducer)
}

// Fail answers with no producers when handling panicked.
func (d *DescribeProducers) Fail(any) { d.Reply(nil) }

// ActiveProducer is one producer id's state on a partition.
type ActiveProducer struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32
	LastTimestamp         int64
	CoordinatorEpoch      int32
	CurrentTxnStartOffset int64
}
