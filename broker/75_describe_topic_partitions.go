package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/topics"
)

func init() {
	register(api{key: 75, min: 0, max: 0, serve: serveDescribeTopicPartitions, fail: failDescribeTopicPartitions})
}

// maxRequestPartitionSizeLimit is Apache's max.request.partition.size.limit
// default.
const maxRequestPartitionSizeLimit = 2000

// serveDescribeTopicPartitions serves DescribeTopicPartitions (key 75),
// version 0.
//
// What `kafka-topics.sh --describe` and the Java admin client (3.8+) ask
// instead of Metadata: topics with their partitions, paged. As Apache's
// DescribeTopicPartitionsRequestHandler: an empty topic list means every
// topic (internal ones too: they are topics in Apache's metadata), named
// topics otherwise; both sorted by name and starting at the cursor
// (topic, partition). At most ResponsePartitionLimit partitions are
// answered (clamped to 1–2000, Apache's max.request.partition.size.limit
// default); NextCursor points at the first one left out. A cursor whose
// topic is not among the named ones, or whose partition is negative, is
// INVALID_REQUEST on every named topic (Apache's error response).
//
// Partitions as Metadata shows them (the owner leads; one replica, in
// sync; leader -1 and no replicas between owners); no eligible leader
// replicas. ACL: DESCRIBE on each topic; listing everything leaves the
// others out, a named one is TOPIC_AUTHORIZATION_FAILED without its id.
// Unknown named topics are UNKNOWN_TOPIC_OR_PARTITION, invalid names
// INVALID_TOPIC_EXCEPTION. Authorized operations are always filled.
func serveDescribeTopicPartitions(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeTopicPartitionsRequest)
	all := len(req.Topics) == 0
	cursorTopic := ""
	if req.Cursor != nil {
		cursorTopic = req.Cursor.Topic
	}
	set := b.topics.load()
	names := map[string]bool{}
	if all {
		for name := range set.byName {
			names[name] = true
		}
		for _, it := range sortedInternalTopics() {
			names[it.name] = true
		}
	} else {
		for _, rt := range req.Topics {
			names[rt.Topic] = true
		}
	}
	for name := range names {
		if name < cursorTopic {
			delete(names, name)
		}
	}
	if req.Cursor != nil && ((!all && !names[req.Cursor.Topic]) || req.Cursor.Partition < 0) {
		b.log.Info("describe topic partitions: bad cursor", "cursor_topic", req.Cursor.Topic, "cursor_partition", req.Cursor.Partition)
		return failDescribeTopicPartitions(req, kerr.InvalidRequest.Code)
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)

	a := b.sec.Access(c)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	var denied []kmsg.DescribeTopicPartitionsResponseTopic
	remaining := int(max(min(req.ResponsePartitionLimit, maxRequestPartitionSizeLimit), 1))
	for _, name := range sorted {
		if !a.Topic(acl.Describe, name) {
			if !all {
				t := kmsg.NewDescribeTopicPartitionsResponseTopic()
				t.Topic, t.ErrorCode = kmsg.StringPtr(name), kerr.TopicAuthorizationFailed.Code
				t.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
				denied = append(denied, t)
			}
			continue
		}
		if remaining == 0 {
			// The cursor points at the start of the next topic.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: 0}
			break
		}
		var md kmsg.MetadataResponseTopic
		if it := internalByName(name); it != nil {
			md = b.metadataInternalTopic(it)
		} else if t := set.byName[name]; t != nil {
			md = b.metadataTopic(t)
		} else {
			if all {
				continue
			}
			t := kmsg.NewDescribeTopicPartitionsResponseTopic()
			t.Topic, t.ErrorCode = kmsg.StringPtr(name), kerr.UnknownTopicOrPartition.Code
			if topics.ValidateName(name) != nil {
				t.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, t)
			continue
		}
		start := 0
		if name == cursorTopic && req.Cursor != nil {
			start = int(req.Cursor.Partition)
		}
		start = min(start, len(md.Partitions))
		upper := min(len(md.Partitions), start+remaining)
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.TopicID, t.IsInternal = md.Topic, md.TopicID, md.IsInternal
		t.AuthorizedOperations = a.Operations(acl.Topic, name)
		t.Partitions = make([]kmsg.DescribeTopicPartitionsResponseTopicPartition, 0, upper-start)
		for _, mp := range md.Partitions[start:upper] {
			p := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			p.Partition, p.LeaderID, p.LeaderEpoch = mp.Partition, mp.Leader, mp.LeaderEpoch
			p.Replicas, p.ISR = mp.Replicas, mp.ISR
			if mp.Leader < 0 {
				p.Replicas, p.ISR = []int32{}, []int32{}
			}
			p.EligibleLeaderReplicas, p.LastKnownELR, p.OfflineReplicas = []int32{}, []int32{}, []int32{}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
		remaining -= upper - start
		if upper < len(md.Partitions) {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(upper)}
			break
		}
	}
	resp.Topics = append(resp.Topics, denied...)
	return resp
}

func failDescribeTopicPartitions(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeTopicPartitionsResponseTopic()
		t.Topic, t.ErrorCode = kmsg.StringPtr(rt.Topic), code
		t.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
