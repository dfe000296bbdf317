package brokertest

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// BatchOpts describes a record batch built by Batch.
type BatchOpts struct {
	ProducerID    int64 // -1 for none
	ProducerEpoch int16
	BaseSequence  int32
	Attributes    int16
	Timestamp     time.Time // first timestamp; zero is now
}

// Batch builds an uncompressed magic-2 record batch of values with no
// producer id, as a non-idempotent client writes it.
func Batch(values ...string) []byte {
	return BuildBatch(BatchOpts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, values...)
}

// BuildBatch builds an uncompressed magic-2 record batch with a valid
// CRC-32C; records are one millisecond apart.
func BuildBatch(o BatchOpts, values ...string) []byte {
	ts := o.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	var records []byte
	for i, v := range values {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Value: []byte(v)}
		rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
		records = rec.AppendTo(records)
	}
	batch := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      o.Attributes,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  ts.UnixMilli(),
		MaxTimestamp:    ts.UnixMilli() + int64(len(values)-1),
		ProducerID:      o.ProducerID,
		ProducerEpoch:   o.ProducerEpoch,
		FirstSequence:   o.BaseSequence,
		NumRecords:      int32(len(values)),
		Records:         records,
	}
	batch.Length = int32(61 - 12 + len(records))
	out := batch.AppendTo(nil)
	FixCRC(out)
	return out
}

// FixCRC recomputes a batch's CRC-32C after a test changed its bytes.
func FixCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32c))
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
