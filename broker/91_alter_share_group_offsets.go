package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 91, min: 0, max: 0, serve: serveAlterShareGroupOffsets, fail: failAlterShareGroupOffsets})
}

// serveAlterShareGroupOffsets serves AlterShareGroupOffsets (key 91),
// version 0 (KIP-932).
//
// Sets the start offset (SPSO) of share-partitions of a share group with
// no members (NON_EMPTY_GROUP otherwise; a group that does not exist is
// created, as Apache's getOrMaybeCreateShareGroup): the window starts
// again there, every record state and delivery count forgotten, fsynced
// before the answer. A consumer or classic group id is GROUP_ID_NOT_FOUND;
// an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. With the
// authorizer: READ on the group and on each topic, as Apache. In a
// cluster, served by the group's coordinator (NOT_COORDINATOR elsewhere),
// which checks the group is empty and has each partition's owner rewrite
// its share-partition (share_offsets_peers.go).
func serveAlterShareGroupOffsets(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	a, peer, forward := b.shareOffsetsCall(c)
	if resp.ErrorCode = b.shareOffsetsGroupCheck(a, acl.Read, req.GroupID, peer); resp.ErrorCode != 0 {
		return resp
	}
	topics := b.topics.load()
	// codes holds what the handler decides itself; ask what the
	// coordinator does.
	type slot struct{ topic, part int }
	codes := map[slot]int16{}
	asks := map[model.TopicIDPartition]slot{}
	offsets := map[model.TopicIDPartition]int64{}
	for i, rt := range req.Topics {
		ot := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := topics.byName[rt.Topic]
		if t != nil {
			ot.TopicID = t.meta.ID
		}
		denied := !a.Topic(acl.Read, rt.Topic)
		for j, rp := range rt.Partitions {
			op := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			op.Partition = rp.Partition
			ot.Partitions = append(ot.Partitions, op)
			switch {
			case denied:
				codes[slot{i, j}] = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				codes[slot{i, j}] = kerr.UnknownTopicOrPartition.Code
			default:
				tp := model.TopicIDPartition{Topic: t.meta.ID, Partition: rp.Partition}
				asks[tp], offsets[tp] = slot{i, j}, rp.StartOffset
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	b.shares.Send(&messages.ShareAlterOffsets{Group: req.GroupID, Offsets: offsets, Reply: func(code int16, got map[model.TopicIDPartition]int16) {
		resp.ErrorCode = code
		for tp, pc := range got {
			codes[asks[tp]] = pc
		}
		for s, pc := range codes {
			resp.Topics[s.topic].Partitions[s.part].ErrorCode = pc
		}
		if !forward || code != 0 {
			c.Reply(resp)
			return
		}
		go func() {
			mergeShareAlter(resp, b.askPeers(func() kmsg.Request { r := *req; return &r }))
			c.Reply(resp)
		}()
	}})
	return nil
}

// shareOffsetsGroupCheck is the first check of AlterShareGroupOffsets
// and DeleteShareGroupOffsets (92), in Apache's order: op on the group
// (GROUP_AUTHORIZATION_FAILED), then this broker coordinating it
// (NOT_COORDINATOR; not asked of a peer's call, which the coordinator
// sent), then the id naming no consumer or classic group
// (GROUP_ID_NOT_FOUND). 0 passes.
func (b *Broker) shareOffsetsGroupCheck(a auth.Access, op acl.Operation, group string, peer bool) int16 {
	switch {
	case !a.Group(op, group):
		return kerr.GroupAuthorizationFailed.Code
	case peer:
		return 0
	}
	if code := b.groupSlotStatus(group); code != 0 {
		return code
	}
	if b.isOtherGroupType(group) {
		return kerr.GroupIDNotFound.Code
	}
	return 0
}

func failAlterShareGroupOffsets(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	resp.ErrorCode = code
	return resp
}
