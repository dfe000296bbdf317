package brokertest

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/partlog/batchtest"
)

// Batch builds an uncompressed magic-2 record batch of values with no
// producer id, stamped now, as a non-idempotent client writes it.
func Batch(values ...string) []byte {
	return batchtest.Plain(time.Now().UnixMilli(), values...)
}

// ProduceRequest is a Produce request (v9 unless changed) carrying one
// batch for topic/partition.
func ProduceRequest(topic string, partition int32, acks int16, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = acks
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// FetchRequest is a sessionless Fetch request (v12 unless changed) for
// one topic/partition from offset.
func FetchRequest(topic string, partition int32, offset int64, maxWait time.Duration, minBytes, maxBytes, partitionMaxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes, req.MaxBytes = minBytes, maxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, partitionMaxBytes
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// OffsetForLeaderEpochRequest asks, at version v, where epoch ended on
// topic/partition, with the client's current leader epoch (-1: none).
func OffsetForLeaderEpochRequest(v int16, topic string, partition, current, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// BuildBatchAt is Batch with its records stamped at ts, ts+1ms, ….
func BuildBatchAt(ts time.Time, values ...string) []byte {
	return batchtest.Plain(ts.UnixMilli(), values...)
}

// FixCRC recomputes a batch's CRC-32C after a test changed its bytes.
func FixCRC(batch []byte) { batchtest.FixCRC(batch) }
