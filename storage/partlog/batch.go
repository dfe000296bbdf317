// Package partlog is the partition log on disk: segments of record batches
// stored byte-for-byte as produced, sparse offset and time indexes, the
// aborted-transaction index, crash recovery, retention, and a read view that
// fetches use without going through the partition actor.
package partlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch v2 layout (spec R-PV-1).
const (
	BatchHeaderSize   = 61
	batchLengthOffset = 8
	batchLeaderEpoch  = 12
	batchMagicOffset  = 16
	batchCRCOffset    = 17
	batchCRCStart     = 21 // the CRC covers attributes through the end
	// logOverhead is the part of a batch not counted in batchLength.
	logOverhead = 12
)

// Batch attribute bits.
const (
	AttrCompressionMask = 0x07
	AttrLogAppendTime   = 0x08
	AttrTransactional   = 0x10
	AttrControl         = 0x20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// ErrShortBatch means the bytes end before the batch does.
var ErrShortBatch = errors.New("record batch truncated")

// BatchHeader is the decoded fixed part of a v2 record batch.
type BatchHeader struct {
	BaseOffset           int64
	Length               int32 // batchLength: bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// ParseBatchHeader decodes the header at the start of b. For magic 0/1
// batches only the offset, length and magic are meaningful.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < batchMagicOffset+1 {
		return BatchHeader{}, ErrShortBatch
	}
	h := BatchHeader{
		BaseOffset:           int64(binary.BigEndian.Uint64(b[0:])),
		Length:               int32(binary.BigEndian.Uint32(b[8:])),
		PartitionLeaderEpoch: int32(binary.BigEndian.Uint32(b[12:])),
		Magic:                int8(b[16]),
	}
	if h.Magic != 2 {
		return h, nil
	}
	if len(b) < BatchHeaderSize {
		return h, ErrShortBatch
	}
	h.CRC = binary.BigEndian.Uint32(b[17:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[21:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[23:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[27:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[35:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[43:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[51:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[53:]))
	h.NumRecords = int32(binary.BigEndian.Uint32(b[57:]))
	return h, nil
}

// Size is the whole batch's size on disk.
func (h BatchHeader) Size() int64 { return int64(h.Length) + logOverhead }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset after the batch.
func (h BatchHeader) NextOffset() int64 { return h.LastOffset() + 1 }

// IsTransactional reports the transactional attribute bit.
func (h BatchHeader) IsTransactional() bool { return h.Attributes&AttrTransactional != 0 }

// IsControl reports the control attribute bit (transaction markers).
func (h BatchHeader) IsControl() bool { return h.Attributes&AttrControl != 0 }

// Compression is the codec id in the attributes (0 none … 4 zstd).
func (h BatchHeader) Compression() int8 { return int8(h.Attributes & AttrCompressionMask) }

// HasProducerID reports whether the batch carries an idempotent identity.
func (h BatchHeader) HasProducerID() bool { return h.ProducerID >= 0 }

// ValidCRC checks the CRC-32C over the bytes it covers.
func ValidCRC(batch []byte) bool {
	if len(batch) < BatchHeaderSize {
		return false
	}
	want := binary.BigEndian.Uint32(batch[batchCRCOffset:])
	return crc32.Checksum(batch[batchCRCStart:], crc32c) == want
}

// SetBaseOffset rewrites the base offset in place; the CRC does not cover it.
func SetBaseOffset(batch []byte, offset int64) {
	binary.BigEndian.PutUint64(batch[0:], uint64(offset))
}

// SetPartitionLeaderEpoch rewrites the leader epoch in place (not covered
// by the CRC either).
func SetPartitionLeaderEpoch(batch []byte, epoch int32) {
	binary.BigEndian.PutUint32(batch[batchLeaderEpoch:], uint32(epoch))
}

// WholeBatches cuts a produce request's records into whole batches, as
// Apache's batch iterator reads them: bytes after the last whole batch
// (too few for a batch, or fewer than its length says) are left out; a
// length too small to be any batch is an error (CORRUPT_MESSAGE).
func WholeBatches(records []byte) ([][]byte, error) {
	var out [][]byte
	for len(records) >= logOverhead {
		size := int64(int32(binary.BigEndian.Uint32(records[batchLengthOffset:]))) + logOverhead
		if size < logOverhead+14 { // Apache's LegacyRecord.RECORD_OVERHEAD_V0
			return out, fmt.Errorf("record batch size %d is smaller than the minimum record overhead", size-logOverhead)
		}
		if size > int64(len(records)) {
			break
		}
		out = append(out, records[:size:size])
		records = records[size:]
	}
	return out, nil
}

// SplitBatches cuts a records field into whole batches. It fails if the
// bytes do not end at a batch boundary.
func SplitBatches(records []byte) ([][]byte, error) {
	var out [][]byte
	for len(records) > 0 {
		if len(records) < logOverhead {
			return out, ErrShortBatch
		}
		size := int64(int32(binary.BigEndian.Uint32(records[batchLengthOffset:]))) + logOverhead
		if size < logOverhead+5 || size > int64(len(records)) {
			return out, fmt.Errorf("%w: batch length %d with %d bytes left", ErrShortBatch, size, len(records))
		}
		out = append(out, records[:size:size])
		records = records[size:]
	}
	return out, nil
}

// setBatchCRC sets a whole batch's CRC.
func setBatchCRC(batch []byte) {
	binary.BigEndian.PutUint32(batch[batchCRCOffset:], crc32.Checksum(batch[batchCRCStart:], crc32c))
}

// StampLogAppendTime marks a batch as LogAppendTime with the given append
// time as its max timestamp and recomputes its CRC, as Apache's
// LogValidator does for message.timestamp.type=LogAppendTime topics:
// readers then see that time on every record of the batch.
func StampLogAppendTime(batch []byte, appendTime int64) {
	attrs := binary.BigEndian.Uint16(batch[21:])
	binary.BigEndian.PutUint16(batch[21:], attrs|AttrLogAppendTime)
	binary.BigEndian.PutUint64(batch[35:], uint64(appendTime))
	setBatchCRC(batch)
}

// SetMaxTimestamp rewrites the batch's max timestamp and recomputes its
// CRC, as Apache's LogValidator does when the records' largest timestamp
// is not the one the producer wrote in the header (time indexes and
// timestamp lookups trust the header).
func SetMaxTimestamp(batch []byte, ts int64) {
	binary.BigEndian.PutUint64(batch[35:], uint64(ts))
	setBatchCRC(batch)
}
