package batchtest

import (
	"bytes"
	"compress/gzip"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codec ids in a batch's attributes.
const (
	Gzip   = 1
	Snappy = 2
	Lz4    = 3
	Zstd   = 4
)

// Records encodes values as a batch's records section, offset deltas and
// timestamp deltas 0, 1, 2, ….
func Records(values ...[]byte) []byte {
	var out []byte
	for i, v := range values {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Value: v}
		rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
		out = rec.AppendTo(out)
	}
	return out
}

// Compress compresses a records section with codec as Kafka clients do
// (snappy: raw block, as librdkafka and franz-go write it).
func Compress(codec int16, raw []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case Gzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case Snappy:
		return s2.EncodeSnappy(nil, raw)
	case Lz4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case Zstd:
		w, _ := zstd.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	default:
		return raw
	}
	return buf.Bytes()
}

// Raw builds a batch around a records section exactly as given, with the
// header's record count and last offset delta as given (a batch that may
// lie about its records), compression attributes codec and a valid CRC.
func Raw(o Opts, codec int16, numRecords, lastOffsetDelta int32, records []byte) []byte {
	b := kmsg.RecordBatch{
		Magic:           2,
		Attributes:      o.Attributes | codec,
		LastOffsetDelta: lastOffsetDelta,
		FirstTimestamp:  o.Timestamp,
		MaxTimestamp:    o.Timestamp + int64(max(numRecords-1, 0)),
		ProducerID:      o.ProducerID,
		ProducerEpoch:   o.ProducerEpoch,
		FirstSequence:   o.BaseSequence,
		NumRecords:      numRecords,
		Records:         records,
	}
	b.Length = int32(61 - 12 + len(records))
	out := b.AppendTo(nil)
	FixCRC(out)
	return out
}

// Compressed is a plain (no producer id) batch of values compressed with
// codec.
func Compressed(codec int16, ts int64, values ...[]byte) []byte {
	n := int32(len(values))
	return Raw(Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: ts}, codec, n, n-1, Compress(codec, Records(values...)))
}
