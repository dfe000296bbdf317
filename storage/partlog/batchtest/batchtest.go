// Package batchtest builds record batches for tests the way Kafka clients
// write them (magic 2, CRC-32C), without depending on the broker, so the
// storage, partition and end-to-end tests share one builder.
package batchtest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// Opts describes a batch.
type Opts struct {
	ProducerID    int64 // -1 for none
	ProducerEpoch int16 // -1 for none
	BaseSequence  int32 // -1 for none
	Attributes    int16
	Timestamp     int64    // first record's timestamp (ms); records are 1 ms apart
	Keys          []string // the records' keys, in order (missing: keyless)
}

// Plain is a batch without a producer id, as a non-idempotent client
// sends it, stamped ts, ts+1, ….
func Plain(ts int64, values ...string) []byte {
	return Build(Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: ts}, values...)
}

// Build encodes an uncompressed magic-2 batch of values, base offset 0,
// with a valid CRC-32C.
func Build(o Opts, values ...string) []byte {
	var records []byte
	for i, v := range values {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Value: []byte(v)}
		if i < len(o.Keys) {
			rec.Key = []byte(o.Keys[i])
		}
		rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
		records = rec.AppendTo(records)
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      o.Attributes,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  o.Timestamp,
		MaxTimestamp:    o.Timestamp + int64(len(values)-1),
		ProducerID:      o.ProducerID,
		ProducerEpoch:   o.ProducerEpoch,
		FirstSequence:   o.BaseSequence,
		NumRecords:      int32(len(values)),
		Records:         records,
	}
	b.Length = int32(61 - 12 + len(records))
	out := b.AppendTo(nil)
	FixCRC(out)
	return out
}

// FixCRC recomputes a batch's CRC-32C after a test changed its bytes.
func FixCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], crc32c))
}
