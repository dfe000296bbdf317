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
	register(api{key: 61, min: 0, max: 0, serve: serveDescribeProducers, fail: failDescribeProducers})
}

// serveDescribeProducers serves DescribeProducers (key 61), version 0.
//
// Each partition's active producers as its partition actor holds them:
// producer id, epoch, last sequence, last timestamp, coordinator epoch and
// the first offset of its open transaction (-1 if none). The quickest way
// to see a KIP-360 fence land: every partition shows the bumped epoch.
//
// With --authorizer: READ on each topic (TOPIC_AUTHORIZATION_FAILED), as
// Apache's code (its documentation says DESCRIBE).
func serveDescribeProducers(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	readable := b.sec.Access(c).Topics(acl.Read, auth.NamesOf(req.Topics, func(t *kmsg.DescribeProducersRequestTopic) string { return t.Topic }))
	g := newGather(func() { c.Reply(resp) })
	for i, rt := range req.Topics {
		out := &resp.Topics[i]
		*out = kmsg.NewDescribeProducersResponseTopic()
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		for j, p := range rt.Partitions {
			slot := &out.Partitions[j]
			*slot = kmsg.NewDescribeProducersResponseTopicPartition()
			slot.Partition = p
			if !auth.AllowedIn(readable, rt.Topic) {
				slot.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			h, code := b.leadPartition(rt.Topic, p)
			if h == nil {
				slot.ErrorCode = code
				continue
			}
			g.add()
			h.Send(&messages.DescribeProducers{Reply: func(ps []messages.ActiveProducer) {
				for _, ap := range ps {
					a := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					a.ProducerID, a.ProducerEpoch, a.LastSequence = ap.ProducerID, int32(ap.ProducerEpoch), ap.LastSequence
					a.LastTimestamp, a.CoordinatorEpoch, a.CurrentTxnStartOffset = ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset
					slot.ActiveProducers = append(slot.ActiveProducers, a)
				}
				g.done()
			}})
		}
	}
	g.done()
	return nil
}

func failDescribeProducers(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			tp := kmsg.NewDescribeProducersResponseTopicPartition()
			tp.Partition, tp.ErrorCode = p, code
			t.Partitions = append(t.Partitions, tp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
