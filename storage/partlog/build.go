package partlog

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rec is one record of a batch the broker writes itself (a view it serves
// as a topic, such as __consumer_offsets).
type Rec struct {
	OffsetDelta int32
	Timestamp   int64 // ms; -1 for none
	Key, Value  []byte
}

// AppendBatch appends an uncompressed magic-2 batch of recs (at least one,
// offset deltas rising; gaps allowed, as compaction leaves them) at
// baseOffset, with no producer id, and its CRC-32C.
func AppendBatch(dst []byte, baseOffset int64, leaderEpoch int32, recs []Rec) []byte {
	first, maxTS := recs[0].Timestamp, recs[0].Timestamp
	var records []byte
	for _, r := range recs {
		maxTS = max(maxTS, r.Timestamp)
		rec := kmsg.Record{TimestampDelta64: r.Timestamp - first, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
		// Length counts the record after its own varint; encode once to size it.
		rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
		records = rec.AppendTo(records)
	}
	batch := kmsg.RecordBatch{
		FirstOffset:          baseOffset,
		PartitionLeaderEpoch: leaderEpoch,
		Magic:                2,
		LastOffsetDelta:      recs[len(recs)-1].OffsetDelta,
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              records,
	}
	batch.Length = int32(BatchHeaderSize - logOverhead + len(records))
	start := len(dst)
	dst = batch.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start+batchCRCOffset:], crc32.Checksum(dst[start+batchCRCStart:], crc32c))
	return dst
}
