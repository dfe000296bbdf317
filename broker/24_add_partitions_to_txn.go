package broker

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 24, min: 0, max: 5, serve: serveAddPartitionsToTxn, fail: failAddPartitionsToTxn})
}

// serveAddPartitionsToTxn serves AddPartitionsToTxn (key 24), versions 0–5
// (R-TXN-4, R-TXN-5, R-TV2-5).
//
// v0–3 (clients): partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION
// and every other partition OPERATION_NOT_ATTEMPTED, with nothing added;
// an empty TransactionalId is INVALID_REQUEST; then the id's coordinator
// actor checks the producer (INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED —
// INVALID_PRODUCER_EPOCH for v0–1), answers CONCURRENT_TRANSACTIONS while
// a transition is in flight, and persists Ongoing with the union of
// partitions. v4+ (broker-to-broker) batch transactions; VerifyOnly
// reports per partition whether it is in the ongoing transaction. v5 also
// lets the broker answer TRANSACTION_ABORTABLE; its adds (VerifyOnly
// false) are a partition leader's or a group coordinator's implicit add
// for a TV2 client (R-TV2-5/6), which start a TV2 transaction and may name
// a group's __consumer_offsets partition.
//
// With --authorizer: v0–3: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic
// (TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED); v4, from
// brokers only: CLUSTER_ACTION on the cluster.
func serveAddPartitionsToTxn(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	a := b.sec.Access(c)
	if req.Version >= 4 {
		// Only brokers send v4 (KIP-890 verification): CLUSTER_ACTION.
		if !a.Peer() {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp
		}
		b.addPartitionsBatched(c, req, resp)
		return nil
	}
	tps := make([]model.TopicPartition, 0)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	if !a.TxnID(acl.Write, req.TransactionalID) {
		resp.Topics = addPartitionsTopics(tps, sameCode(len(tps), kerr.TransactionalIDAuthorizationFailed.Code))
		return resp
	}
	writable := a.Topics(acl.Write, auth.NamesOf(tps, func(tp *model.TopicPartition) string { return tp.Topic }))
	if codes, failed := b.unknownPartitions(tps, writable, false); failed {
		resp.Topics = addPartitionsTopics(tps, codes)
		return resp
	}
	if req.TransactionalID == "" {
		resp.Topics = addPartitionsTopics(tps, sameCode(len(tps), kerr.InvalidRequest.Code))
		return resp
	}
	txns := b.txnsFor(req.TransactionalID)
	if txns == nil {
		resp.Topics = addPartitionsTopics(tps, sameCode(len(tps), kerr.NotCoordinator.Code))
		return resp
	}
	txns.AddPartitions(req.TransactionalID, &messages.AddPartitionsToTxn{
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Partitions: tps,
		Reply: func(code int16, per []int16) {
			if code != 0 {
				per = sameCode(len(tps), fencedForVersion(code, req.Version >= 2))
			}
			resp.Topics = addPartitionsTopics(tps, per)
			c.Reply(resp)
		},
	})
	return nil
}

// unknownPartitions is R-TXN-4 step 2: if any partition's topic may not
// be written (TOPIC_AUTHORIZATION_FAILED; an internal topic never may) or
// does not exist (UNKNOWN_TOPIC_OR_PARTITION), the rest answer
// OPERATION_NOT_ATTEMPTED. A verification (v4 VerifyOnly, from a peer)
// may name a group's __consumer_offsets partition: a group coordinator
// checking a TxnOffsetCommit (txn_offset_verify.go).
func (b *Broker) unknownPartitions(tps []model.TopicPartition, writable map[string]bool, verifyOnly bool) ([]int16, bool) {
	codes := make([]int16, len(tps))
	failed := false
	for i, tp := range tps {
		switch {
		case verifyOnly && tp.Topic == consumerOffsetsTopic && b.partitionExists(tp.Topic, tp.Partition):
		case internalByName(tp.Topic) != nil || !auth.AllowedIn(writable, tp.Topic):
			// Apache never authorizes a client to write an internal
			// topic (KafkaApis.handleAddPartitionsToTxnRequest).
			codes[i] = kerr.TopicAuthorizationFailed.Code
			failed = true
		case !b.partitionExists(tp.Topic, tp.Partition):
			codes[i] = kerr.UnknownTopicOrPartition.Code
			failed = true
		}
	}
	if !failed {
		return nil, false
	}
	for i := range codes {
		if codes[i] == 0 {
			codes[i] = kerr.OperationNotAttempted.Code
		}
	}
	return codes, true
}

func sameCode(n int, code int16) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = code
	}
	return out
}

// addPartitionsTopics groups per-partition codes back into topics, in
// request order.
func addPartitionsTopics(tps []model.TopicPartition, codes []int16) []kmsg.AddPartitionsToTxnResponseTopic {
	var out []kmsg.AddPartitionsToTxnResponseTopic
	for i, tp := range tps {
		if len(out) == 0 || out[len(out)-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnResponseTopic()
			t.Topic = tp.Topic
			out = append(out, t)
		}
		p := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, codes[i]
		out[len(out)-1].Partitions = append(out[len(out)-1].Partitions, p)
	}
	return out
}

// batchedAddWait bounds how long an add in a v4+ request (the
// broker-only version a partition leader sends) waits for its
// transaction's markers (R-TXN-2): the answer gathers every transaction
// of the request, and the leader sends one request at a time to each
// coordinator (broker/peers), so one wait holds back every other
// producer's add behind it, even when the request carries a single
// transaction; Apache's leader retries such an add for up to the same
// 100 ms (add.partitions.to.txn.retry.backoff.max.ms) before it gives up.
var batchedAddWait atomic.Int64 // nanoseconds; 0: 100 ms (tests set it while a broker runs)

func batchedAddWaitNow() time.Duration {
	if d := time.Duration(batchedAddWait.Load()); d > 0 {
		return d
	}
	return 100 * time.Millisecond
}

// addPartitionsBatched is R-TXN-5 (v4).
func (b *Broker) addPartitionsBatched(c *server.Call, req *kmsg.AddPartitionsToTxnRequest, resp *kmsg.AddPartitionsToTxnResponse) {
	resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
	g := newGather(func() { c.Reply(resp) })
	for i, rt := range req.Transactions {
		out := &resp.Transactions[i]
		*out = kmsg.NewAddPartitionsToTxnResponseTransaction()
		out.TransactionalID = rt.TransactionalID
		var tps []model.TopicPartition
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
		fill := func(codes []int16) {
			for _, t := range addPartitionsTopics(tps, codes) {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}
		tv2Add := req.Version >= 5 && !rt.VerifyOnly
		if codes, failed := b.unknownPartitions(tps, nil, rt.VerifyOnly || tv2Add); failed {
			fill(codes)
			continue
		}
		if rt.TransactionalID == "" {
			fill(sameCode(len(tps), kerr.InvalidRequest.Code))
			continue
		}
		txns := b.txnsFor(rt.TransactionalID)
		if txns == nil {
			fill(sameCode(len(tps), kerr.NotCoordinator.Code))
			continue
		}
		g.add()
		txns.AddPartitions(rt.TransactionalID, &messages.AddPartitionsToTxn{
			ProducerID: rt.ProducerID, ProducerEpoch: rt.ProducerEpoch, Partitions: tps, VerifyOnly: rt.VerifyOnly, TV2: tv2Add,
			Deadline: batchedDeadline(c),
			Reply: func(code int16, per []int16) {
				if code != 0 {
					per = sameCode(len(tps), code)
				}
				fill(per)
				g.done()
			},
		})
	}
	g.done()
}

// batchedDeadline is the wait deadline of an add in a v4+ request:
// batchedAddWait from its arrival.
func batchedDeadline(c *server.Call) time.Time {
	return c.Received.Add(batchedAddWaitNow())
}

func failAddPartitionsToTxn(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		resp.ErrorCode = code
		return resp
	}
	var tps []model.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, model.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	resp.Topics = addPartitionsTopics(tps, sameCode(len(tps), code))
	return resp
}
