package broker

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

// serveOffsetCommit serves OffsetCommit (key 8), versions 0–9.
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
func serveOffsetCommit(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	a := b.sec.Access(c)
	if !a.Group(acl.Read, req.Group) {
		return failOffsetCommit(req, kerr.GroupAuthorizationFailed.Code)
	}
	readable := a.Topics(acl.Read, auth.NamesOf(req.Topics, func(t *kmsg.OffsetCommitRequestTopic) string { return t.Topic }))
	oc := b.newOffsetCommit(readable)
	expire := int64(-1)
	if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
		expire = oc.now + req.RetentionTimeMillis
	}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			p := &t.Partitions[j]
			p.Default()
			p.Partition = rp.Partition
			o := consumergroup.Offset{Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, CommitTimestamp: oc.now, ExpireTimestamp: expire}
			if req.Version == 1 && rp.Timestamp != -1 {
				o.CommitTimestamp = rp.Timestamp
			}
			oc.add(rt.Topic, rp.Partition, o, rp.Metadata, &p.ErrorCode)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(oc.offsets) == 0 {
		return resp
	}
	if code := b.groupStatus(req.Group, true); code != 0 {
		oc.fill(oc.all(code))
		return resp
	}
	if b.isShareGroup(req.Group) {
		b.log.Info("offset commit refused: the group is a share group", "group", req.Group)
		oc.fill(oc.all(kerr.GroupIDNotFound.Code))
		return resp
	}
	release := c.Hold()
	msg := &messages.CommitOffsets{
		Request: consumergroup.CommitRequest{Version: req.Version, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation, Offsets: oc.offsets},
		Reply: func(codes map[model.TopicPartition]int16) {
			oc.fill(func(tp model.TopicPartition) int16 { return codes[tp] })
			c.Reply(resp)
			release()
		},
	}
	switch b.sendToGroup(req.Group, req.Generation < 0, msg) {
	case groupAbsent:
		// A generation for a group that does not exist: an old member.
		oc.fill(oc.all(kerr.IllegalGeneration.Code))
	case groupDying:
		oc.fill(oc.all(kerr.CoordinatorNotAvailable.Code))
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

// offsetCommit is what OffsetCommit and TxnOffsetCommit (28) share: each
// partition's own checks, the offsets that pass them (for the group), and
// the group's answers written back into the response.
type offsetCommit struct {
	b        *Broker
	readable map[string]bool // the topics READ is allowed on (nil: all)
	now      int64           // the commit timestamp, ms
	offsets  map[model.TopicPartition]consumergroup.Offset
	answers  []committedAnswer
	// remap, if set, turns a code into the one the request's version
	// knows (TxnOffsetCommit v0–1 has no COORDINATOR_LOAD_IN_PROGRESS).
	remap func(int16) int16
}

// committedAnswer is where the response answers one partition that went
// to the group (a request may name a partition twice: both are answered).
type committedAnswer struct {
	tp   model.TopicPartition
	code *int16
}

func (b *Broker) newOffsetCommit(readable map[string]bool) *offsetCommit {
	return &offsetCommit{b: b, readable: readable, now: time.Now().UnixMilli(), offsets: map[model.TopicPartition]consumergroup.Offset{}}
}

// add checks one partition, answering in *code a topic READ is denied on
// (TOPIC_AUTHORIZATION_FAILED) or an unknown partition
// (UNKNOWN_TOPIC_OR_PARTITION); a partition that passes is committed as o
// with its metadata and answered by fill. code points into the response,
// which must not move until fill.
func (oc *offsetCommit) add(topic string, partition int32, o consumergroup.Offset, metadata *string, code *int16) {
	switch {
	case !auth.AllowedIn(oc.readable, topic):
		*code = kerr.TopicAuthorizationFailed.Code
	case !oc.b.partitionExists(topic, partition):
		*code = kerr.UnknownTopicOrPartition.Code
	default:
		if metadata != nil {
			o.Metadata = *metadata
		}
		tp := model.TopicPartition{Topic: topic, Partition: partition}
		oc.offsets[tp] = o
		oc.answers = append(oc.answers, committedAnswer{tp, code})
	}
}

// fill answers every partition that went to the group with codes.
func (oc *offsetCommit) fill(codes func(model.TopicPartition) int16) {
	for _, a := range oc.answers {
		*a.code = codes(a.tp)
		if oc.remap != nil {
			*a.code = oc.remap(*a.code)
		}
	}
}

// all is codes answering every partition with code.
func (oc *offsetCommit) all(code int16) func(model.TopicPartition) int16 {
	return func(model.TopicPartition) int16 { return code }
}
