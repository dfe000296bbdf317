package partition

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/storage/partlog"
)

const offsetOutOfRange = 1 // kerr.OffsetOutOfRange.Code

// produce validates and appends one batch (spec R-PV-4..11), answering
// once the batch is durable (or at once for errors and duplicates that
// are).
func (p *Partition) produce(m *messages.Produce) {
	if m.Verified {
		// The producer is taken now: once m is answered its batch's bytes
		// may be reused (the request frame goes back to the pool).
		if h, err := partlog.ParseBatchHeader(m.Batch); err == nil {
			defer p.releaseHeld(h.ProducerID)
		}
	} else if p.hold(m) {
		return
	}
	if !p.open() {
		m.NotLeader()
		return
	}
	if p.log.Failed() != nil {
		p.rejectProduce(m, kerr.KafkaStorageError.Code, offlineMessage)
		return
	}
	if m.Acks == -1 && p.cfg.MinInsyncReplicas > 1 {
		// This broker is the partition's only replica (Apache checks this
		// first, in Partition.appendRecordsToLeader).
		p.rejectProduce(m, kerr.NotEnoughReplicas.Code, fmt.Sprintf(
			"the in-sync replica set has 1 member, fewer than min.insync.replicas=%d required by acks=all", p.cfg.MinInsyncReplicas))
		return
	}
	h, code, msg := p.validate(m)
	if code == awaitMarker {
		p.awaitBehind(h.ProducerID, m)
		return
	}
	if code == VerifyRemotely {
		p.holdBehind(h.ProducerID)
		m.Reply(messages.ProduceResult{ErrorCode: code, MarkerGen: p.markerGen, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1})
		return
	}
	if code != 0 {
		p.noteZombie(h, code)
		p.rejectProduce(m, code, msg)
		return
	}
	if h.HasProducerID() {
		d := p.producers.Check(producerBatch(h))
		if d.Duplicate != nil {
			dup := *d.Duplicate
			p.await(dup.LastOffset+1, func(durable bool) {
				p.answerProduce(m, durable, messages.ProduceResult{
					BaseOffset: dup.FirstOffset, LogAppendTime: dup.Timestamp, LogStartOffset: p.log.LogStartOffset(),
				})
			})
			return
		}
		if d.Code != 0 {
			p.noteZombie(h, d.Code)
			p.rejectProduce(m, d.Code, "")
			return
		}
	}
	now := time.Now()
	appendTime := int64(-1)
	if p.cfg.LogAppendTime {
		appendTime = now.UnixMilli()
		partlog.StampLogAppendTime(m.Batch, appendTime)
	}
	// As Apache's appendAsLeader: the leader's epoch goes into the batch
	// header (outside the CRC), where consumers read it back (KIP-320).
	partlog.SetPartitionLeaderEpoch(m.Batch, p.cfg.LeaderEpoch)
	h, err := p.log.Append(m.Batch, now)
	if err != nil {
		p.fail(err)
		p.rejectProduce(m, kerr.KafkaStorageError.Code, offlineMessage)
		return
	}
	if h.HasProducerID() {
		p.producers.Apply(producerBatch(h))
		delete(p.recoveredTxns, h.ProducerID) // verified (verifyTxn), or not transactional
	}
	p.cfg.Observer.Appended(p.cfg.Topic, p.cfg.Partition, int(h.NumRecords), len(m.Batch))
	base := h.BaseOffset
	p.afterWrite()
	if m.Acks == 0 {
		m.Reply(messages.ProduceResult{BaseOffset: base, LogAppendTime: appendTime})
		return
	}
	p.await(h.NextOffset(), func(durable bool) {
		p.answerProduce(m, durable, messages.ProduceResult{BaseOffset: base, LogAppendTime: appendTime, LogStartOffset: p.log.LogStartOffset()})
	})
}

func (p *Partition) answerProduce(m *messages.Produce, durable bool, r messages.ProduceResult) {
	if !p.open() {
		// Appended, but the lease it was appended under may have expired
		// meanwhile: a peer may lead the partition now, and whether the
		// batch is in what that peer took over is not known here. Not
		// NOT_LEADER_OR_FOLLOWER, which says it was not written: a
		// client told that may give the batch up and reuse its sequence.
		// REQUEST_TIMED_OUT is Apache's answer to an append whose outcome
		// is unknown (replicas that did not confirm it): the client
		// retries the same batch until an answer settles it (a retry the
		// new owner holds is a duplicate; one it does not is appended).
		p.rejectProduce(m, kerr.RequestTimedOut.Code, "")
		return
	}
	if !durable {
		p.rejectProduce(m, kerr.KafkaStorageError.Code, offlineMessage)
		return
	}
	m.Reply(r)
}

// offlineMessage is what a client is told when the partition's disk
// failed: no server path or OS error (those are in the broker's log).
const offlineMessage = "the partition is offline after a disk error on the broker; the write was not made durable"

func (p *Partition) rejectProduce(m *messages.Produce, code int16, msg string) {
	if msg != "" {
		p.logger().Warn("produce rejected", "error", kerr.ErrorForCode(code), "reason", msg)
	}
	m.Reply(messages.ProduceResult{ErrorCode: code, ErrorMessage: msg, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: p.log.LogStartOffset()})
}

// open reports whether this broker may append and acknowledge now
// (cluster mode: its lease is certainly alive).
func (p *Partition) open() bool { return !p.abandoned && (p.cfg.Gate == nil || p.cfg.Gate()) }

// validate runs the per-batch checks that precede producer state, in
// Apache's order: size, transactional verification, CRC, content.
func (p *Partition) validate(m *messages.Produce) (partlog.BatchHeader, int16, string) {
	h, err := partlog.ParseBatchHeader(m.Batch)
	if err != nil || h.Size() != int64(len(m.Batch)) {
		return h, kerr.CorruptMessage.Code, "batch length does not match its bytes"
	}
	if h.Magic != 2 {
		return h, kerr.InvalidRecord.Code, fmt.Sprintf("record batch magic %d; Produce v3+ carries only magic 2", h.Magic)
	}
	if h.BaseOffset != 0 {
		return h, kerr.InvalidRecord.Code, "a client batch must have base offset 0"
	}
	if p.cfg.MaxMessageBytes > 0 && int64(len(m.Batch)) > int64(p.cfg.MaxMessageBytes) {
		return h, kerr.MessageTooLarge.Code, fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", len(m.Batch), p.cfg.MaxMessageBytes)
	}
	if h.IsTransactional() && !h.IsControl() {
		if code := p.verifyTxn(m, h); code != 0 {
			return h, code, ""
		}
	}
	if !partlog.ValidCRC(m.Batch) {
		return h, kerr.CorruptMessage.Code, "CRC-32C mismatch"
	}
	// Apache's LogValidator.validateBatch, in its order.
	switch {
	case int64(h.LastOffsetDelta)+1 <= 0:
		return h, kerr.InvalidRecord.Code, fmt.Sprintf("batch has an invalid offset range: last offset delta %d", h.LastOffsetDelta)
	case h.NumRecords <= 0:
		return h, kerr.InvalidRecord.Code, fmt.Sprintf("invalid reported count for record batch: %d", h.NumRecords)
	case h.NumRecords != h.LastOffsetDelta+1:
		return h, kerr.InvalidRecord.Code, fmt.Sprintf("inconsistent batch offset range [0, %d] and count of records %d", h.LastOffsetDelta, h.NumRecords)
	case h.IsControl():
		return h, kerr.InvalidRecord.Code, "clients may not write control batches"
	case h.HasProducerID() && h.BaseSequence < 0:
		return h, kerr.InvalidRecord.Code, "idempotent batch without a base sequence"
	}
	return p.validateRecords(m.Batch, h)
}

// validateRecords reads every record, inflating a compressed batch as a
// stream within the topic's inflate limit: the records must be exactly the
// ones the header declares (issue 9 rows 7 and 12: a 69-byte batch
// claiming 2³¹−1 records, a 405 KB zstd batch inflating to 2 GB). As
// Apache, a header max timestamp that is not the records' largest is
// rewritten.
func (p *Partition) validateRecords(batch []byte, h partlog.BatchHeader) (partlog.BatchHeader, int16, string) {
	maxTS := int64(-1)
	keyless := false
	err := partlog.WalkRecords(batch, partlog.InflateLimit(p.cfg.MaxMessageBytes), func(r partlog.Record) bool {
		maxTS = max(maxTS, r.Timestamp)
		keyless = keyless || r.NullKey
		return true
	})
	var re *partlog.RecordError
	switch {
	case err == nil:
	case errors.As(err, &re) && re.Kind == partlog.TooLarge:
		return h, kerr.MessageTooLarge.Code, re.Msg
	case errors.As(err, &re) && re.Kind == partlog.Undecodable:
		return h, kerr.UnknownServerError.Code, re.Msg
	default:
		return h, kerr.InvalidRecord.Code, err.Error()
	}
	if keyless && p.cfg.Log.Compact {
		// Apache's LogValidator.validateKey: the cleaner could never
		// tell which record a keyless one supersedes.
		return h, kerr.InvalidRecord.Code, fmt.Sprintf("Compacted topic cannot accept message without key in topic partition %s.", actorName(p.cfg.Topic, p.cfg.Partition))
	}
	if h.Attributes&partlog.AttrLogAppendTime == 0 && h.MaxTimestamp != maxTS {
		partlog.SetMaxTimestamp(batch, maxTS)
		h.MaxTimestamp = maxTS
	}
	return h, 0, ""
}

// verifyTxn is R-PV-6: a transactional batch from a producer with no
// transaction open here must belong to the coordinator's ongoing
// transaction, so a delayed batch of an earlier transaction cannot land in
// the next one. Check and append run in one Receive, so no marker can slip
// between them.
func (p *Partition) verifyTxn(m *messages.Produce, h partlog.BatchHeader) int16 {
	if m.Verified && m.VerifyCode != 0 {
		return m.VerifyCode // the coordinator refused it (produce_held.go)
	}
	// The open transaction is this batch's only at its epoch (as
	// Apache's hasOngoingTransaction): a TV2 EndTxn may be answered
	// before its marker reaches this partition (R-TV2-7), and the
	// client's next transaction, at the bumped epoch, must not land in
	// the one still open here.
	e := p.producers.Entry(h.ProducerID)
	if e != nil && e.HasOpenTxn() && e.Epoch == h.ProducerEpoch &&
		(!p.recoveredTxns[h.ProducerID] || p.producers.Check(producerBatch(h)).Duplicate != nil) {
		return 0 // (a retry of a written batch is answered as that batch, verified or not)
	}
	if e != nil && e.HasOpenTxn() && e.Epoch < h.ProducerEpoch && m.AddToTxn && !m.Verified && !m.AwaitedMarker {
		return awaitMarker // a later transaction's: produce_await.go
	}
	if d := p.producers.Check(producerBatch(h)); d.Code == kerr.InvalidProducerEpoch.Code {
		// A stale epoch — fenced, or ended (R-TV2-7: its EndTxn may be
		// answered while its markers are out, and the coordinator would
		// hold the question until they are in) — is refused here, as
		// Apache checks the epoch before the verification guard.
		return d.Code
	}
	if m.Verified {
		if p.verifiedStill(h.ProducerID, m.VerifiedGen) {
			return 0 // verified by the coordinator, no marker of its producer since
		}
		return kerr.NotEnoughReplicas.Code // its transaction may have ended: verify again
	}
	if m.AddToTxn && m.TransactionalID != nil {
		// R-TV2-5: already in the coordinator's transaction, or the
		// broker has the coordinator add it (whatever the verification
		// setting: the partition must be in the transaction to get its
		// marker).
		if p.cfg.Verifier != nil && p.cfg.Verifier.VerifyTxn(*m.TransactionalID, h.ProducerID, h.ProducerEpoch, p.cfg.Topic, p.cfg.Partition) == 0 {
			return 0
		}
		return VerifyRemotely
	}
	if p.cfg.Verifier == nil || m.TransactionalID == nil {
		return 0
	}
	return p.cfg.Verifier.VerifyTxn(*m.TransactionalID, h.ProducerID, h.ProducerEpoch, p.cfg.Topic, p.cfg.Partition)
}
