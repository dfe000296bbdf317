package broker_test

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/storage/partlog/batchtest"
)

var plainBatch = batchtest.Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: 1000}

// produceRaw sends one batch to partition 0 of topic and returns the
// partition's answer.
func produceRaw(t *testing.T, c *brokertest.Conn, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return c.RoundTrip(brokertest.ProduceRequest(topic, 0, -1, batch)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// listOffsetRaw is ListOffsets v8 for partition 0 of topic.
func listOffsetRaw(t *testing.T, c *brokertest.Conn, topic string, timestamp int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(8)
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.RoundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
}

// Issue 9 rows 7 and 12: Produce validates the records it stores, as
// Apache's LogValidator. A batch whose header lies about its records is
// INVALID_RECORD and changes nothing; a compressed batch inflating past
// the topic's limit (128 × max.message.bytes, at least 16 MiB) is
// MESSAGE_TOO_LARGE, found while inflating it as a stream.
func TestProduceRefusesBatchesThatLie(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "lies", 1, map[string]*string{"max.message.bytes": kmsg.StringPtr("65536")})
	c := brokertest.Dial(t, b.Addr())
	three := batchtest.Records([]byte("a"), []byte("b"), []byte("c"))
	bomb := batchtest.Compressed(batchtest.Zstd, 1000, make([]byte, 9<<20), make([]byte, 9<<20)) // 18 MiB of zeros
	if len(bomb) > 65536 {
		t.Fatalf("bomb of %d bytes is over max.message.bytes", len(bomb))
	}
	for _, tc := range []struct {
		name  string
		batch []byte
		code  int16
	}{
		// Row 12: 69 bytes claiming 2³¹−1 records moved the end offset by 2³¹.
		{"2³¹−1 records claimed", batchtest.Raw(plainBatch, 0, 1<<31-1, 1<<31-2, batchtest.Records([]byte("x"))), kerr.InvalidRecord.Code},
		{"fewer records than claimed", batchtest.Raw(plainBatch, 0, 4, 3, three), kerr.InvalidRecord.Code},
		{"more records than claimed", batchtest.Raw(plainBatch, 0, 2, 1, three), kerr.InvalidRecord.Code},
		{"compressed, fewer records than claimed", batchtest.Raw(plainBatch, batchtest.Lz4, 9, 8, batchtest.Compress(batchtest.Lz4, three)), kerr.InvalidRecord.Code},
		// Row 7: a small zstd batch inflating far beyond it.
		{"zstd bomb", bomb, kerr.MessageTooLarge.Code},
		{"undecodable gzip", batchtest.Raw(plainBatch, batchtest.Gzip, 3, 2, []byte("not gzip at all")), kerr.UnknownServerError.Code},
	} {
		p := produceRaw(t, c, "lies", tc.batch)
		if p.ErrorCode != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(tc.code))
		}
	}
	if end := listOffsetRaw(t, c, "lies", -1); end.ErrorCode != 0 || end.Offset != 0 {
		t.Fatalf("end offset %d (%v) after refused batches, want 0", end.Offset, kerr.ErrorForCode(end.ErrorCode))
	}
	// An honest compressed batch is stored and found by timestamp.
	good := batchtest.Compressed(batchtest.Zstd, 5000, bytes.Repeat([]byte("z"), 1000), []byte("second"))
	if p := produceRaw(t, c, "lies", good); p.ErrorCode != 0 {
		t.Fatalf("honest zstd batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if lo := listOffsetRaw(t, c, "lies", 5001); lo.ErrorCode != 0 || lo.Offset != 1 || lo.Timestamp != 5001 {
		t.Fatalf("by timestamp 5001: offset %d timestamp %d (%v), want 1 at 5001", lo.Offset, lo.Timestamp, kerr.ErrorForCode(lo.ErrorCode))
	}
}

// As Apache's LogValidator, a batch whose header max timestamp is not its
// records' largest is stored with the right one, so timestamp lookups
// (which skip batches by their header) find its records.
func TestProduceCorrectsTheMaxTimestamp(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "maxts", 1, nil)
	c := brokertest.Dial(t, b.Addr())
	batch := batchtest.Raw(plainBatch, 0, 3, 2, batchtest.Records([]byte("a"), []byte("b"), []byte("c")))
	copy(batch[35:43], []byte{0, 0, 0, 0, 0, 0, 0, 1}) // max timestamp 1, records at 1000..1002
	batchtest.FixCRC(batch)
	if p := produceRaw(t, c, "maxts", batch); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if lo := listOffsetRaw(t, c, "maxts", 1002); lo.Offset != 2 || lo.Timestamp != 1002 {
		t.Fatalf("by timestamp 1002: offset %d timestamp %d, want 2 at 1002", lo.Offset, lo.Timestamp)
	}
	fetched := c.RoundTrip(brokertest.FetchRequest("maxts", 0, 0, 0, 1, 1<<20, 1<<20)).(*kmsg.FetchResponse).Topics[0].Partitions[0].RecordBatches
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(fetched); err != nil || rb.MaxTimestamp != 1002 {
		t.Fatalf("stored max timestamp %d (%v), want 1002", rb.MaxTimestamp, err)
	}
}
