package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/consumergroup"
)

func init() {
	// blocking: verification may be a round trip to the transaction
	// coordinator, which must not run on the network loop.
	register(api{key: 28, min: 0, max: 5, blocking: true, serve: serveTxnOffsetCommit, fail: failTxnOffsetCommit})
}

// serveTxnOffsetCommit serves TxnOffsetCommit (key 28), versions 0–5 (spec
// transactions.md R-TXN-10..13; v4 only lets the broker answer
// TRANSACTION_ABORTABLE, KIP-890; v5 is transaction version 2's: the
// group's offsets partition is added to the transaction implicitly instead
// of verified, R-TV2-6; v6's topic ids are not served).
//
// Goes to the group coordinator. Check order: unknown topic or partition →
// UNKNOWN_TOPIC_OR_PARTITION for those partitions; an empty group id →
// INVALID_GROUP_ID for the rest (R-TXN-10); verification with the
// transaction coordinator (R-TXN-11); the group's member checks, creating
// the group Empty if it does not exist (R-TXN-12); then per partition
// OFFSET_METADATA_TOO_LARGE, and INVALID_PRODUCER_EPOCH when the epoch is
// below the last one recorded for the producer on the group's offsets slot
// (R-TXN-13). Accepted offsets are durable in the slot log but staged
// under (group, producer id), invisible to OffsetFetch until
// completeTxnOffsets commits them (R-RC-6). v0–1 answer
// COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS (R-GEN-2);
// v2+ carry leader epochs; v3 the member id, generation and
// group.instance.id (KIP-447), which v0–2 leave at "" and -1.
//
// With --authorizer: WRITE on the transactional id, READ on the group, READ
// on each topic (R-TXN-10).
func serveTxnOffsetCommit(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	a := b.sec.Access(c)
	if !a.TxnID(acl.Write, req.TransactionalID) {
		return failTxnOffsetCommit(req, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	if !a.Group(acl.Read, req.Group) {
		return failTxnOffsetCommit(req, kerr.GroupAuthorizationFailed.Code)
	}
	readable := a.Topics(acl.Read, auth.NamesOf(req.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic }))
	oc := b.newOffsetCommit(readable)
	if req.Version < 2 {
		oc.remap = func(code int16) int16 {
			if code == kerr.CoordinatorLoadInProgress.Code {
				return kerr.CoordinatorNotAvailable.Code
			}
			return code
		}
	}
	for _, rt := range req.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition = rp.Partition
			oc.add(rt.Topic, rp.Partition, consumergroup.Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTimestamp: oc.now, ExpireTimestamp: -1}, rp.Metadata, &p.ErrorCode)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(oc.offsets) == 0 {
		return resp
	}
	if code := b.groupStatus(req.Group, false); code != 0 {
		oc.fill(oc.all(code))
		return resp
	}
	if b.isShareGroup(req.Group) {
		b.log.Info("transactional offset commit refused: the group is a share group", "group", req.Group)
		oc.fill(oc.all(kerr.GroupIDNotFound.Code))
		return resp
	}
	verify := b.verifyTxnOffsetCommit
	if req.Version >= 5 {
		verify = b.addTxnOffsetCommit
	}
	if code := verify(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group); code != 0 {
		b.log.Info("TxnOffsetCommit failed verification with the transaction coordinator", "transactional_id", req.TransactionalID,
			"producer_id", req.ProducerID, "epoch", req.ProducerEpoch, "group", req.Group, "code", code)
		oc.fill(oc.all(consumergroup.MapCommitError(code)))
		return resp
	}
	// Hold the connection until the group answers, beyond this
	// goroutine's own hold, so the next request on it sees the commit.
	release := c.Hold()
	msg := &messages.CommitOffsets{
		Transactional: true,
		Request: consumergroup.CommitRequest{Version: req.Version, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation,
			Offsets: oc.offsets, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch},
		Reply: func(codes map[model.TopicPartition]int16) {
			oc.fill(func(tp model.TopicPartition) int16 { return codes[tp] })
			c.Reply(resp)
			release()
		},
	}
	if b.sendToGroup(req.Group, true, msg) != routed {
		release()
		oc.fill(oc.all(kerr.CoordinatorNotAvailable.Code))
		return resp
	}
	return nil
}

func failTxnOffsetCommit(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
