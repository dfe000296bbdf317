package broker

// OffsetCommit (key 8), versions 0–9.
//
// Apache's handleOffsetCommitRequest: partitions of unknown topics or
// partitions answer UNKNOWN_TOPIC_OR_PARTITION; the rest go to the group
// (created if it does not exist and the generation is negative, else
// ILLEGAL_GENERATION), which validates membership and generation, writes
// the offsets to its slot log and answers once they are fsynced (group
// commit across groups). The connection is held meanwhile, as Apache mutes
// it, so a later request on it sees the commit. Version notes: v0 has no
// generation or member (it is taken as generation -1; Apache 3.7 stores
// v0 commits in ZooKeeper, or refuses them in KRaft mode); v1 carries a
// commit timestamp per partition; v2–v4 a retention time that sets an
// expire timestamp; v6+ leader epochs; v7+ group.instance.id; v9 is v8 for
// classic groups, and the one KIP-848 consumer group members must use:
// there the generation is the member epoch, checked as Apache 4.0 does
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; UNSUPPORTED_VERSION below v9).
// A share group's id is GROUP_ID_NOT_FOUND (Apache's
// ShareGroup.validateOffsetCommit: "is not a consumer group"), as for
// OffsetFetch, TxnOffsetCommit and OffsetDelete.
//
// With --authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED
// everywhere), then READ on each topic (TOPIC_AUTHORIZATION_FAILED).

import (
	"time"

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
	register(api{key: 8, min: 0, max: 9, serve: serveOffsetCommit, fail: failOffsetCommit})
}

func serveOffsetCommit(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	a := b.sec.Access(c)
	if !a.Group(acl.Read, req.Group) {
		return failOffsetCommit(req, kerr.GroupAuthorizationFailed.Code)
	}
	readable := a.Topics(acl.Read, auth.NamesOf(req.Topics, func(t *kmsg.OffsetCommitRequestTopic) string { return t.Topic }))
	now := time.Now().UnixMilli()
	expire := int64(-1)
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
		expire = now + req.RetentionTimeMillis
	}
	// slots[i][j] answers req.Topics[i].Partitions[j]; valid ones go to
	// the group and are filled from its answer.
	offsets := map[model.TopicPartition]consumergroup.Offset{}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition = rp.Partition
			if !auth.AllowedIn(readable, rt.Topic) {
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if !b.partitionExists(rt.Topic, rp.Partition) {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				o := consumergroup.Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTimestamp: now, ExpireTimestamp: expire}
				if rp.Metadata != nil {
					o.Metadata = *rp.Metadata
				}
				if req.Version == 1 && rp.Timestamp != -1 {
					o.CommitTimestamp = rp.Timestamp
				}
				offsets[model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = o
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	fill := func(codes func(model.TopicPartition) int16) {
		for i := range resp.Topics {
			t := &resp.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if _, ok := offsets[model.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; ok {
					p.ErrorCode = codes(model.TopicPartition{Topic: t.Topic, Partition: p.Partition})
				}
			}
		}
	}
	all := func(code int16) func(model.TopicPartition) int16 {
		return func(model.TopicPartition) int16 { return code }
	}
	if len(offsets) == 0 {
		return resp
	}
	if code := b.groupStatus(req.Group, true); code != 0 {
		fill(all(code))
		return resp
	}
	if b.isShareGroup(req.Group) {
		b.log.Info("offset commit refused: the group is a share group", "group", req.Group)
		fill(all(kerr.GroupIDNotFound.Code))
		return resp
	}
	release := c.Hold()
	msg := &messages.CommitOffsets{
		Request: consumergroup.CommitRequest{Version: req.Version, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation, Offsets: offsets},
		Reply: func(codes map[model.TopicPartition]int16) {
			fill(func(tp model.TopicPartition) int16 { return codes[tp] })
			c.Reply(resp)
			release()
		},
	}
	switch b.sendToGroup(req.Group, req.Generation < 0, msg) {
	case groupAbsent:
		// A generation for a group that does not exist: an old member.
		fill(all(kerr.IllegalGeneration.Code))
	case groupDying:
		fill(all(kerr.CoordinatorNotAvailable.Code))
	default:
		return nil
	}
	release()
	return resp
}

func failOffsetCommit(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
