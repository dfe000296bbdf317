package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/storage/partlog"
)

func init() {
	register(api{key: 2, min: 0, max: 11, serve: serveListOffsets, fail: failListOffsets})
}

const (
	listLatest         = -1
	listEarliest       = -2
	listMaxTimestamp   = -3
	listEarliestLocal  = -4
	listLatestTiered   = -5 // v9+
	listEarliestUpload = -6 // v11+
)

// serveListOffsets serves ListOffsets (key 2), versions 0–11.
//
// v0 (Kafka 3.7 still serves it; Burrow and old sarama ask it) answers a
// list of offsets, at most MaxNumOffsets, as Apache's
// legacyFetchOffsetsBefore: for latest the high watermark then each
// segment's start, newest first; for earliest the log start; for a
// timestamp the starts of the segments whose records are all older
// (Apache uses the files' modification times; kaas the segments' largest
// record timestamps). v9's -5 (latest tiered offset) and v11's -6
// (earliest pending upload) find nothing without tiered storage
// (offset -1, as Apache with remote storage off); v10's timeout bounds a
// remote lookup there is none of.
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
func serveListOffsets(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListOffsetsRequest)
	described := b.sec.Access(c).Topics(acl.Describe, auth.NamesOf(req.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic }))
	go func() {
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewListOffsetsResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				if !auth.AllowedIn(described, rt.Topic) {
					p := kmsg.NewListOffsetsResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
					p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
					t.Partitions = append(t.Partitions, p)
					continue
				}
				if req.Version == 0 {
					t.Partitions = append(t.Partitions, b.listOffsetsV0(rt.Topic, rp))
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
		// Always empty (topic_internal.go): start = end = 0, and no
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
	case listLatestTiered, listEarliestUpload:
		if (rp.Timestamp == listLatestTiered && req.Version < 9) || (rp.Timestamp == listEarliestUpload && req.Version < 11) {
			p.ErrorCode = kerr.InvalidRequest.Code
			return p
		}
		// No tiered storage: nothing is found (offset and timestamp -1).
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

// listOffsetsV0 answers one partition of a v0 request (the old-style
// list of offsets).
func (b *Broker) listOffsetsV0(topic string, rp kmsg.ListOffsetsRequestTopicPartition) kmsg.ListOffsetsResponseTopicPartition {
	p := kmsg.NewListOffsetsResponseTopicPartition()
	p.Partition = rp.Partition
	p.OldStyleOffsets = []int64{}
	if it := internalByName(topic); it != nil && it.hasPartition(rp.Partition) {
		var hw int64
		if isOffsetsTopic(it) {
			v, code := b.offsetsTopicView(rp.Partition)
			if code != 0 {
				p.ErrorCode = code
				return p
			}
			_, hw, _ = viewOffsets(v)
		}
		if rp.MaxNumOffsets > 0 {
			p.OldStyleOffsets = append(p.OldStyleOffsets, hw)
		}
		return p
	}
	v, code := b.leaderView(topic, rp.Partition, -1)
	if v == nil {
		p.ErrorCode = code
		return p
	}
	p.OldStyleOffsets = legacyOffsetsBefore(v, rp.Timestamp, rp.MaxNumOffsets)
	return p
}

// legacyOffsetsBefore is Apache's legacyFetchOffsetsBefore as a consumer
// sees it: the segments' starts (not below the log start), plus the high
// watermark if the last segment holds data, from the one the timestamp
// picks down to the oldest, at most maxOffsets of them, newest first.
func legacyOffsetsBefore(v *partlog.View, ts int64, maxOffsets int32) []int64 {
	type point struct{ offset, ts int64 }
	var points []point
	segs := v.SegmentStarts()
	for _, s := range segs {
		if s.Base >= v.HighWatermark {
			break // not readable yet: a consumer sees the high watermark
		}
		points = append(points, point{offset: max(s.Base, v.LogStart), ts: s.MaxTimestamp})
	}
	if v.HighWatermark > v.LogStart || len(points) == 0 {
		points = append(points, point{offset: v.HighWatermark, ts: time.Now().UnixMilli()})
	}
	start := len(points) - 1
	switch ts {
	case listLatest:
	case listEarliest:
		start = 0
	default:
		for start >= 0 && points[start].ts > ts {
			start--
		}
	}
	out := []int64{}
	for ; start >= 0 && int32(len(out)) < maxOffsets; start-- {
		if n := len(out); n == 0 || out[n-1] != points[start].offset {
			out = append(out, points[start].offset)
		}
	}
	return out
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
