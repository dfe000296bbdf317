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
	register(api{key: 47, min: 0, max: 0, serve: serveOffsetDelete, fail: failOffsetDelete})
}

// serveOffsetDelete serves OffsetDelete (key 47), version 0.
//
// Deletes a group's committed offsets for some partitions (Apache's
// handleDeleteOffsets): unknown topics or partitions answer
// UNKNOWN_TOPIC_OR_PARTITION; a group that does not exist
// GROUP_ID_NOT_FOUND, a live non-consumer group NON_EMPTY_GROUP (both at
// the top level, with no partitions); a live consumer group keeps the
// offsets of topics it is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC). The
// answer waits until the tombstones are durable; the connection is held
// meanwhile. If they cannot be made durable the answer is NOT_COORDINATOR
// at the top level and the offsets are kept.
//
// With --authorizer: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ
// on each topic (TOPIC_AUTHORIZATION_FAILED).
func serveOffsetDelete(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	a := b.sec.Access(c)
	if !a.Group(acl.Delete, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	readable := a.Topics(acl.Read, auth.NamesOf(req.Topics, func(t *kmsg.OffsetDeleteRequestTopic) string { return t.Topic }))
	var tps []model.TopicPartition
	known := map[model.TopicPartition]bool{}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetDeleteResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetDeleteResponseTopicPartition()
			p.Partition = rp.Partition
			tp := model.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if !auth.AllowedIn(readable, rt.Topic) {
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			} else if !b.partitionExists(rt.Topic, rp.Partition) {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if !known[tp] {
				known[tp] = true
				tps = append(tps, tp)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	groupError := func(code int16) kmsg.Response {
		resp.ErrorCode, resp.Topics = code, nil
		return resp
	}
	if code := b.groupStatus(req.Group, false); code != 0 {
		return groupError(code)
	}
	if b.isShareGroup(req.Group) {
		b.log.Info("offset delete refused: the group is a share group", "group", req.Group)
		return groupError(kerr.GroupIDNotFound.Code)
	}
	release := c.Hold()
	msg := &messages.DeleteOffsets{Partitions: tps, Reply: func(code int16, codes map[model.TopicPartition]int16) {
		defer release()
		if code != 0 {
			c.Reply(groupError(code))
			return
		}
		for i := range resp.Topics {
			t := &resp.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				if code, ok := codes[model.TopicPartition{Topic: t.Topic, Partition: p.Partition}]; ok {
					p.ErrorCode = code
				}
			}
		}
		c.Reply(resp)
	}}
	if b.sendToGroup(req.Group, false, msg) != routed {
		release()
		return groupError(kerr.GroupIDNotFound.Code)
	}
	return nil
}

func failOffsetDelete(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.ErrorCode = code
	return resp
}
