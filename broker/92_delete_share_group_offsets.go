package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sharegroup"
)

func init() {
	register(api{key: 92, min: 0, max: 0, serve: serveDeleteShareGroupOffsets, fail: failDeleteShareGroupOffsets})
}

// serveDeleteShareGroupOffsets serves DeleteShareGroupOffsets (key 92),
// version 0 (KIP-932).
//
// Forgets a share group's share-partitions of the topics named: the next
// fetch starts them again from share.auto.offset.reset. Only for a group
// with no members (NON_EMPTY_GROUP); a group that does not exist is
// GROUP_ID_NOT_FOUND, a topic that does not, UNKNOWN_TOPIC_OR_PARTITION.
// The deletion is fsynced before the answer. With the authorizer: DELETE
// on the group, READ on each topic. In a cluster, served by the group's
// coordinator (NOT_COORDINATOR elsewhere), which checks the group is
// empty and has each partition's owner delete its share-partitions
// (share_offsets_peers.go).
func serveDeleteShareGroupOffsets(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	a, peer, forward := b.shareOffsetsCall(c)
	if resp.ErrorCode = b.shareOffsetsGroupCheck(a, acl.Delete, req.GroupID, peer); resp.ErrorCode != 0 {
		return resp
	}
	topics := b.topics.load()
	var ids []sharegroup.TopicID
	parts := map[string]int32{}
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		ot.Topic = rt.Topic
		t := topics.byName[rt.Topic]
		switch {
		case !a.Topic(acl.Read, rt.Topic):
			ot.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t == nil:
			ot.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			ot.TopicID = t.meta.ID
			ids = append(ids, t.meta.ID)
			parts[rt.Topic] = int32(len(t.parts))
		}
		resp.Topics = append(resp.Topics, ot)
	}
	b.shares.Send(&messages.ShareDeleteOffsets{Group: req.GroupID, Topics: ids, Reply: func(code int16) {
		topics := resp.Topics
		resp.ErrorCode = code
		if code != 0 {
			resp.Topics = nil
		}
		if !forward || (code != 0 && code != kerr.GroupIDNotFound.Code) {
			c.Reply(resp)
			return
		}
		go func() {
			mergeShareDelete(resp, b.askPeers(func() kmsg.Request { r := *req; return &r }), topics, parts)
			c.Reply(resp)
		}()
	}})
	return nil
}

func failDeleteShareGroupOffsets(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	resp.ErrorCode = code
	return resp
}
