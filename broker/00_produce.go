package broker

import (
	"errors"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/partition"
	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/quota"
	"kaas/storage/partlog"
)

func init() {
	register(api{key: 0, min: 0, max: 12, serve: serveProduce, fail: failProduce})
}

const compressionZstd = 4

// serveProduce serves Produce (key 0), versions 0–12. From v3, record
// batches of magic 2 only; v0–2 (Kafka 3.7 still serves them) carry message
// sets of magic 0 or 1, each converted up to one magic-2 batch before the
// partition sees it (storage/partlog/legacy.go), as Apache's LogValidator
// converts them: the log holds magic 2 alone, so these batches are the one
// case where kaas stores bytes it built rather than the producer's. A
// message that fails its CRC is CORRUPT_MESSAGE. v11 only lets the broker
// answer TRANSACTION_ABORTABLE (KIP-890); v12 is transaction version 2's: a
// transactional batch for a partition not yet in the producer's transaction
// adds it at the coordinator (txn_implicit_add.go, R-TV2-5) instead of
// failing verification. (v13 names topics by id: not served.)
//
// Each partition's single batch goes to its partition actor, which
// validates it, checks producer state and appends; the answer is assembled
// as the actors reply (each after the fsync covering its batch) and leaves
// in request order. acks=0 gets no answer at all. Request-level checks as
// in Apache: invalid acks → INVALID_REQUIRED_ACKS everywhere; a
// transactional batch without a TransactionalId → 53 everywhere (R-PV-3);
// transactional batches of two producer ids → 49 everywhere (R-PV-6).
// With the authorizer on: transactional batches need WRITE on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere),
// each topic WRITE (TOPIC_AUTHORIZATION_FAILED, checked before anything
// else about it); idempotent batches need nothing more (KIP-679).
// Per partition: an internal topic → INVALID_TOPIC_EXCEPTION ("Cannot
// append to internal topic", Apache's ReplicaManager); unknown topic
// (auto-created when allowed), not exactly one
// magic-2 batch → INVALID_RECORD (Apache's ProduceRequest.validateRecords;
// the issue text asked for UNSUPPORTED_FOR_MESSAGE_FORMAT, Apache wins),
// zstd below v7 → UNSUPPORTED_COMPRESSION_TYPE.
func serveProduce(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ProduceRequest)
	a := b.sec.Access(c)
	code, txnl := produceRequestError(req)
	if code == 0 && txnl && !a.TxnID(acl.Write, *req.TransactionID) {
		code = kerr.TransactionalIDAuthorizationFailed.Code
	}
	if code != 0 {
		if req.Acks == 0 {
			c.NoReply()
			return nil
		}
		return failProduce(req, code)
	}
	// The produce byte-rate quota counts the request, whatever its acks
	// (acks=0 gets no answer but is muted all the same), here on the
	// event loop: the mute is in place before the connection's next
	// request is dispatched, so a pipelining producer overshoots by one
	// request, as on Apache, which reads one request at a time.
	c.Throttle(b.recordBandwidth(quota.Produce, c, c.Size))
	writable := a.Topics(acl.Write, auth.NamesOf(req.Topics, func(t *kmsg.ProduceRequestTopic) string { return t.Topic }))
	// Unknown topics are auto-created off the event loop; the connection
	// is held so that later requests on it are dispatched after this one.
	// With the authorizer on, creating one needs CREATE as in Metadata.
	var missing []string
	for _, rt := range req.Topics {
		if b.topics.load().byName[rt.Topic] == nil && internalByName(rt.Topic) == nil && b.cfg.AutoCreateTopics &&
			auth.AllowedIn(writable, rt.Topic) && a.MayCreate(rt.Topic) {
			missing = append(missing, rt.Topic)
		}
	}
	if len(missing) == 0 {
		b.dispatchProduce(c, req, writable)
		return nil
	}
	release := c.Hold()
	go func() {
		defer release()
		for _, name := range missing {
			if _, err := b.autoCreate(name); err != nil {
				b.log.Debug("produce to a topic that cannot be auto-created", "topic", name, "err", err)
			}
		}
		b.dispatchProduce(c, req, writable)
	}()
	return nil
}

// produceRequestError returns an error that applies to every partition,
// and whether the request carries transactional batches (which need
// WRITE on its transactional id).
func produceRequestError(req *kmsg.ProduceRequest) (code int16, transactional bool) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return kerr.InvalidRequiredAcks.Code, false
	}
	txnPID := int64(-1)
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			h, err := partlog.ParseBatchHeader(rp.Records)
			if err != nil || h.Magic != 2 || !h.IsTransactional() {
				continue
			}
			if req.TransactionID == nil {
				return kerr.TransactionalIDAuthorizationFailed.Code, true
			}
			if txnPID >= 0 && h.ProducerID != txnPID {
				return kerr.InvalidProducerIDMapping.Code, true
			}
			txnPID = h.ProducerID
		}
	}
	return 0, txnPID >= 0
}

func (b *Broker) dispatchProduce(c *server.Call, req *kmsg.ProduceRequest, writable map[string]bool) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	// acks=0 gets no answer, but is settled only once every partition has
	// appended: a later request on the connection sees the records. Every
	// partition has answered then, and none reads its batch again: the
	// frame they were decoded from goes back to the pool.
	g := newGather(func() {
		if req.Acks != 0 {
			c.Reply(resp)
		} else {
			c.NoReply()
		}
		c.ReleaseFrame()
	})
	topics := b.topics.load()
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t := topics.byName[rt.Topic]
		for j, rp := range rt.Partitions {
			slot := &out.Partitions[j]
			*slot = kmsg.NewProduceResponseTopicPartition()
			slot.Partition = rp.Partition
			slot.BaseOffset, slot.LogAppendTime, slot.LogStartOffset = -1, -1, -1
			if !auth.AllowedIn(writable, rt.Topic) {
				slot.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if internalByName(rt.Topic) != nil {
				msg := "Cannot append to internal topic " + rt.Topic
				slot.ErrorCode, slot.ErrorMessage = kerr.InvalidTopicException.Code, &msg
				b.log.Info("produce to an internal topic refused", "topic", rt.Topic, "client", c.ClientID)
				continue
			}
			if t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts) {
				slot.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			h := t.parts[rp.Partition]
			if h == nil || !b.leaseAlive() {
				// Led by a peer, or this broker holds no lease that is
				// certainly alive: nothing is appended. (Whether an
				// append may be acknowledged is the partition's own
				// gate: the lease it was claimed under.)
				slot.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			batch, code, msg := checkProduceRecords(req.Version, rp.Records, partlog.InflateLimit(t.resolved.MaxMessageBytes))
			if code != 0 {
				slot.ErrorCode, slot.ErrorMessage = code, &msg
				b.log.Warn("produce rejected", "topic", rt.Topic, "partition", rp.Partition, "client", c.ClientID, "reason", msg)
				continue
			}
			g.add()
			tp := model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			m := &messages.Produce{Batch: batch, Acks: req.Acks, TransactionalID: req.TransactionID, AddToTxn: req.Version >= 12}
			var answered atomic.Bool
			m.Reply = func(r messages.ProduceResult) {
				if r.ErrorCode == partition.VerifyRemotely {
					if m.AddToTxn {
						b.addAtCoordinator(h, m, tp, r.MarkerGen, produceDeadline(c.Received, req.TimeoutMillis))
					} else {
						b.verifyAtCoordinator(h, m, tp, r.MarkerGen)
					}
					return
				}
				if !answered.CompareAndSwap(false, true) {
					// A partition answers a batch once; a second answer
					// must not count for another partition's, whose
					// batch may still be on its way to its log (the
					// frame goes back to the pool with the last).
					b.log.Error("a partition answered a produced batch twice; the second answer is dropped", "topic", tp.Topic, "partition", tp.Partition)
					return
				}
				slot.ErrorCode = r.ErrorCode
				slot.BaseOffset, slot.LogAppendTime, slot.LogStartOffset = r.BaseOffset, r.LogAppendTime, r.LogStartOffset
				if r.ErrorMessage != "" {
					msg := r.ErrorMessage
					slot.ErrorMessage = &msg
				}
				g.done()
			}
			h.Produce(m)
		}
	}
	g.done()
}

// verifyAtCoordinator is R-PV-6 for a partition led here whose
// transaction is coordinated by a peer: the partition actor answered
// partition.VerifyRemotely at marker generation gen; the coordinator is
// asked (AddPartitionsToTxn v4, verify only) and the batch goes back to
// the actor marked verified at gen, or is answered with the coordinator's
// refusal. m.Reply then runs once more, with the real answer.
func (b *Broker) verifyAtCoordinator(h *partition.Handle, m *messages.Produce, tp model.TopicPartition, gen uint64) {
	hdr, err := partlog.ParseBatchHeader(m.Batch)
	if err != nil || b.peers == nil || m.TransactionalID == nil {
		m.Verified, m.VerifiedGen, m.VerifyCode = true, gen, kerr.NotEnoughReplicas.Code
		h.Produce(m)
		return
	}
	b.peers.VerifyTxn(*m.TransactionalID, hdr.ProducerID, hdr.ProducerEpoch, tp, func(code int16) {
		// Back through the actor either way: the producer's later
		// batches to this partition are held until this one returns.
		m.Verified, m.VerifiedGen, m.VerifyCode = true, gen, code
		h.Produce(m)
	})
}

// checkProduceRecords is Apache's ProduceRequest.validateRecords: v3+
// carries exactly one batch, of magic 2, and zstd needs v7. As Apache's
// batch iterator, a partial batch after the whole ones is not an error:
// it is trimmed (UnifiedLog.trimInvalidBytes), so the batch to append is
// returned.
func checkProduceRecords(version int16, records []byte, inflateLimit int64) ([]byte, int16, string) {
	if version < 3 && len(records) > 16 && records[16] < 2 {
		return upConvert(records, inflateLimit)
	}
	batches, err := partlog.WholeBatches(records)
	if err != nil {
		return nil, kerr.CorruptMessage.Code, err.Error()
	}
	if len(batches) == 0 {
		return nil, kerr.InvalidRecord.Code, "produce requests must have at least one record batch per partition"
	}
	if len(batches) != 1 {
		return nil, kerr.InvalidRecord.Code, "produce requests v3+ must contain exactly one record batch per partition"
	}
	h, err := partlog.ParseBatchHeader(batches[0])
	if err != nil {
		return nil, kerr.CorruptMessage.Code, "record batch header truncated"
	}
	if h.Magic != 2 {
		return nil, kerr.InvalidRecord.Code, "produce requests v3+ may only contain record batches with magic version 2"
	}
	if version < 7 && h.Compression() == compressionZstd {
		return nil, kerr.UnsupportedCompressionType.Code, "zstd compression needs produce v7 or later"
	}
	return batches[0], 0, ""
}

// upConvert turns a v0–2 message set into the magic-2 batch the log holds.
func upConvert(set []byte, inflateLimit int64) ([]byte, int16, string) {
	msgs, _, err := partlog.ParseMessageSet(set, inflateLimit)
	if err == nil {
		return partlog.UpConvert(msgs), 0, ""
	}
	if re := (*partlog.RecordError)(nil); errors.As(err, &re) && re.Kind == partlog.Corrupt {
		return nil, kerr.CorruptMessage.Code, err.Error()
	}
	return nil, kerr.InvalidRecord.Code, err.Error()
}

func failProduce(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
