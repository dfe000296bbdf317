package broker

// ListOffsets (key 2), versions 1–8.
//
// Timestamp -2 (earliest) answers the log start offset, -1 (latest) the
// high watermark or, for read_committed (v2+), the last stable offset; -3
// (max timestamp, v7+) the record with the largest timestamp; -4 (earliest
// local, v8) is the log start offset as there is no tiered storage. A
// timestamp >= 0 finds the first record at or after it. A result at or
// beyond the isolation level's bound is offset -1, timestamp -1, no error
// (R-RC-5). Answered from the partitions' read views, off the actors. A
// partition led by a peer broker is NOT_LEADER_OR_FOLLOWER; a
// CurrentLeaderEpoch (v4+) older than the leader's is FENCED_LEADER_EPOCH,
// a newer one UNKNOWN_LEADER_EPOCH (leaderEpochCode). LeaderEpoch (v4+) is,
// as in Apache, the epoch this broker leads at for latest, and for the
// other lookups the epoch that wrote the offset found (the leader-epoch
// cache's), -1 when none is known.
//
// With --authorizer: DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/storage/partlog"
)

func init() {
	register(api{key: 2, min: 1, max: 8, serve: serveListOffsets, fail: failListOffsets})
}

const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
)

func serveListOffsets(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListOffsetsRequest)
	described := b.access(c).topics(acl.Describe, namesOf(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic }))
	go func() {
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				if !allowedIn(described, rt.Topic) {
					p := kmsg.NewListOffsetsResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
					p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
					t.Partitions = append(t.Partitions, p)
					continue
				}
				t.Partitions = append(t.Partitions, b.listOffset(req, rt.Topic, rp))
			}
			resp.Topics = append(resp.Topics, t)
		}
		c.Reply(resp)
	}()
	return nil
}

func (b *Broker) listOffset(req *kmsg.ListOffsetsRequest, topic string, rp kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	p := kmsg.NewListOffsetsResponseTopicPartition()
	p.Partition = rp.Partition
	p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
	if it := internalByName(topic); isOffsetsTopic(it) && it.hasPartition(rp.Partition) {
		v, code := b.offsetsTopicView(rp.Partition)
		if code != 0 {
			p.ErrorCode = code
			return p
		}
		listOffsetsTopic(v, req.Version >= 2 && req.IsolationLevel == readCommitted, rp, &p)
		return p
	}
	if it := internalByName(topic); it != nil && it.hasPartition(rp.Partition) {
		// Always empty (internal_topics.go): start = end = 0, and no
		// record for any timestamp.
		p.LeaderEpoch = 0
		if rp.Timestamp == listLatest || rp.Timestamp == listEarliest || rp.Timestamp == listEarliestLocal {
			p.Offset = 0
		} else if rp.Timestamp < 0 && rp.Timestamp != listMaxTimestamp {
			p.ErrorCode = kerr.InvalidRequest.Code
		}
		return p
	}
	v, code := b.leaderView(topic, rp.Partition, rp.CurrentLeaderEpoch)
	if v == nil {
		p.ErrorCode = code
		return p
	}
	bound := v.HighWatermark
	if req.Version >= 2 && req.IsolationLevel == readCommitted {
		bound = v.LastStable
	}
	var err error
	switch rp.Timestamp {
	case listLatest:
		// Apache answers the epoch it leads at, not the last batch's.
		p.Offset, p.LeaderEpoch = bound, v.LeaderEpoch
	case listEarliest, listEarliestLocal:
		p.Offset = v.LogStart
	case listMaxTimestamp:
		p.Offset, p.Timestamp, err = found(v.MaxTimestamp(bound))
	default:
		if rp.Timestamp < 0 {
			p.ErrorCode = kerr.InvalidRequest.Code
			return p
		}
		p.Offset, p.Timestamp, err = found(v.OffsetForTimestamp(rp.Timestamp, bound))
	}
	if err != nil {
		// A batch that does not decode is CORRUPT_MESSAGE, as Apache's
		// CorruptRecordException; a failed read is a storage error.
		b.log.Error("list offsets read failed", "topic", topic, "partition", rp.Partition, "err", err)
		p.ErrorCode = kerr.KafkaStorageError.Code
		if errors.Is(err, partlog.ErrCorruptBatch) {
			p.ErrorCode = kerr.CorruptMessage.Code
		}
	}
	if p.Offset >= 0 && p.Offset < v.LogStart && rp.Timestamp >= 0 {
		p.Offset = v.LogStart
	}
	if p.Offset >= 0 && rp.Timestamp != listLatest {
		// The epoch that wrote the offset found (-1 for data written
		// before epochs were recorded), from the leader-epoch cache.
		if e, ok := v.Epochs.EpochForOffset(p.Offset); ok {
			p.LeaderEpoch = e
		}
	}
	return p
}

// found maps a lookup miss to offset -1, timestamp -1 (no error).
func found(offset, ts int64, ok bool, err error) (int64, int64, error) {
	if !ok || err != nil {
		return -1, -1, err
	}
	return offset, ts, nil
}

func failListOffsets(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
