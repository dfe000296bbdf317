package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 21, min: 0, max: 2, serve: serveDeleteRecords, fail: failDeleteRecords})
}

// serveDeleteRecords serves DeleteRecords (key 21), versions 0–2.
//
// Moves each partition's log start offset to the requested offset (-1: the
// high watermark) through its partition actor, which also deletes the
// segments wholly below it and persists the new start. An offset beyond
// the high watermark → OFFSET_OUT_OF_RANGE.
//
// With --authorizer: DELETE on each topic (TOPIC_AUTHORIZATION_FAILED).
func serveDeleteRecords(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	deletable := b.sec.Access(c).Topics(acl.Delete, auth.NamesOf(req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic }))
	g := newGather(func() { c.Reply(resp) })
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewDeleteRecordsResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			slot := &out.Partitions[j]
			*slot = kmsg.NewDeleteRecordsResponseTopicPartition()
			slot.Partition, slot.LowWatermark = rp.Partition, -1
			if !auth.AllowedIn(deletable, rt.Topic) {
				slot.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			h, code := b.leadPartition(rt.Topic, rp.Partition)
			if h == nil {
				slot.ErrorCode = code
				continue
			}
			if rp.Offset < -1 {
				slot.ErrorCode = kerr.OffsetOutOfRange.Code
				continue
			}
			g.add()
			h.Send(&messages.DeleteRecords{Offset: rp.Offset, Reply: func(r messages.DeleteRecordsResult) {
				slot.ErrorCode, slot.LowWatermark = r.ErrorCode, r.LowWatermark
				g.done()
			}})
		}
	}
	g.done()
	return nil
}

func failDeleteRecords(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewDeleteRecordsResponseTopicPartition()
			p.Partition, p.ErrorCode, p.LowWatermark = rp.Partition, code, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
