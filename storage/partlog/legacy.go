package partlog

// The message formats before record batches (magic 0 and 1), for the
// request versions Kafka 3.7 still serves and 4.0 removed (KIP-896):
// Produce v0–2 carry message sets, which are converted up to one magic-2
// batch (as Apache's LogValidator converts them on append, the log being
// magic 2 only); Fetch v0–3 read message sets, which record batches are
// converted down to (as Apache's LazyDownConversionRecords does: v0–1
// magic 0, v2–3 magic 1; control batches dropped; headers, which the old
// formats cannot carry, dropped). Converted messages are uncompressed.
//
//	message set = (offset i64, size i32, message)*
//	message     = crc u32 (IEEE, of the rest), magic i8, attributes i8,
//	              [timestamp i64 (magic 1)], key bytes, value bytes
//
// A compressed message is a wrapper whose value is a compressed message
// set (for magic 1, inner offsets are relative to the wrapper's last).

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Message-format attributes.
const (
	legacyCodecMask     = 0x07
	legacyLogAppendTime = 0x08 // magic 1
)

// LegacyMessage is one message of a magic-0/1 set.
type LegacyMessage struct {
	Offset     int64
	Timestamp  int64 // -1 for magic 0
	Key, Value []byte
}

// ParseMessageSet reads a Produce v0–2 message set: every message (inner
// messages of compressed wrappers in order), checking each CRC and
// inflating at most limit bytes in all (limit <= 0: no limit). It returns
// the messages and the magic they were written in. Errors are
// *RecordError (CORRUPT_MESSAGE, INVALID_RECORD, as Apache answers).
func ParseMessageSet(set []byte, limit int64) ([]LegacyMessage, int8, error) {
	var out []LegacyMessage
	magic := int8(-1)
	inflated := int64(0)
	var walk func(set []byte, depth int) error
	walk = func(set []byte, depth int) error {
		for len(set) > 0 {
			if len(set) < 12 {
				return &RecordError{Kind: Corrupt, Msg: "message set ends inside a message header"}
			}
			offset := int64(binary.BigEndian.Uint64(set))
			size := int(int32(binary.BigEndian.Uint32(set[8:])))
			if size < 14 || size > len(set)-12 {
				return &RecordError{Kind: Corrupt, Msg: fmt.Sprintf("message size %d out of range", size)}
			}
			msg := set[12 : 12+size]
			set = set[12+size:]
			if crc32.ChecksumIEEE(msg[4:]) != binary.BigEndian.Uint32(msg) {
				return &RecordError{Kind: Corrupt, Msg: "message CRC mismatch"}
			}
			m, attrs := int8(msg[4]), msg[5]
			if m != 0 && m != 1 {
				return &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("message magic %d in a message set", m)}
			}
			if magic < 0 {
				magic = m
			}
			rest := msg[6:]
			ts := int64(-1)
			if m == 1 {
				if len(rest) < 8 {
					return &RecordError{Kind: Corrupt, Msg: "message ends inside its timestamp"}
				}
				ts = int64(binary.BigEndian.Uint64(rest))
				rest = rest[8:]
			}
			key, rest, ok := legacyBytes(rest)
			if !ok {
				return &RecordError{Kind: Corrupt, Msg: "message key out of range"}
			}
			value, rest, ok := legacyBytes(rest)
			if !ok || len(rest) != 0 {
				return &RecordError{Kind: Corrupt, Msg: "message value out of range"}
			}
			codec := int8(attrs & legacyCodecMask)
			if codec == 0 {
				out = append(out, LegacyMessage{Offset: offset, Timestamp: ts, Key: key, Value: value})
				continue
			}
			if depth > 0 {
				return &RecordError{Kind: Undecodable, Msg: "compressed message inside a compressed message"}
			}
			r, release, err := decompressor(codec, value)
			if err != nil {
				return err
			}
			budget := int64(1<<62 - 1)
			if limit > 0 {
				budget = limit - inflated
			}
			inner, err := io.ReadAll(io.LimitReader(r, budget+1))
			release()
			if err != nil {
				return &RecordError{Kind: Undecodable, Msg: fmt.Sprintf("failed to decompress a message set: %v", err)}
			}
			if inflated += int64(len(inner)); limit > 0 && inflated > limit {
				return &RecordError{Kind: Undecodable, Msg: "a compressed message set inflates past the limit"}
			}
			first := len(out)
			if err := walk(inner, depth+1); err != nil {
				return err
			}
			if m == 1 && attrs&legacyLogAppendTime != 0 {
				// LogAppendTime on the wrapper stamps every inner message.
				// (Inner offsets, relative in magic 1, are not kept: the
				// partition assigns offsets.)
				for i := first; i < len(out); i++ {
					out[i].Timestamp = ts
				}
			}
		}
		return nil
	}
	if err := walk(set, 0); err != nil {
		return nil, 0, err
	}
	if len(out) == 0 {
		return nil, 0, &RecordError{Kind: Corrupt, Msg: "empty message set"}
	}
	return out, magic, nil
}

// legacyBytes reads an i32-length-prefixed (−1: null) byte field.
func legacyBytes(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := int32(binary.BigEndian.Uint32(b))
	if n < 0 {
		return nil, b[4:], n == -1
	}
	if int(n) > len(b)-4 {
		return nil, nil, false
	}
	return b[4 : 4+n : 4+n], b[4+n:], true
}

// UpConvert builds the magic-2 batch Apache's log would hold for msgs: no
// producer id, offsets 0..n-1 (the partition assigns the base), each
// message's timestamp (−1, none, for magic 0: as Apache converts them).
func UpConvert(msgs []LegacyMessage) []byte {
	recs := make([]Rec, len(msgs))
	for i, m := range msgs {
		recs[i] = Rec{OffsetDelta: int32(i), Timestamp: m.Timestamp, Key: m.Key, Value: m.Value}
	}
	return AppendBatch(nil, 0, -1, recs)
}

// DownConvert turns the record batches in data (whole batches as a fetch
// reads them; a partial last one is dropped) into a message set of magic
// 0 or 1, uncompressed. Control batches are left out. Each batch inflates
// to at most limit bytes (limit <= 0: no limit), and no batch is converted
// once maxOut bytes are out (maxOut <= 0: no bound): uncompressed, old
// messages can be many times the batches a fetch's byte budget read.
func DownConvert(data []byte, magic int8, limit int64, maxOut int) ([]byte, error) {
	batches, err := WholeBatches(data)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, batch := range batches {
		if maxOut > 0 && len(out) >= maxOut {
			break
		}
		h, err := ParseBatchHeader(batch)
		if err != nil {
			return nil, err
		}
		if h.IsControl() {
			continue
		}
		appendTime := h.Attributes&AttrLogAppendTime != 0
		err = eachFullRecord(batch, h, limit, func(r kmsg.Record) {
			ts := h.BaseTimestamp + r.TimestampDelta64
			if appendTime {
				ts = h.MaxTimestamp
			}
			out = appendLegacyMessage(out, magic, h.BaseOffset+int64(r.OffsetDelta), ts, appendTime, r.Key, r.Value)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendLegacyMessage appends one uncompressed message at offset.
func appendLegacyMessage(dst []byte, magic int8, offset, ts int64, appendTime bool, key, value []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	sizeAt := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0) // size, crc
	start := len(dst)
	attrs := byte(0)
	if magic == 1 && appendTime {
		attrs |= legacyLogAppendTime
	}
	dst = append(dst, byte(magic), attrs)
	if magic == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			dst = binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
			continue
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(f)))
		dst = append(dst, f...)
	}
	binary.BigEndian.PutUint32(dst[sizeAt:], uint32(len(dst)-start+4))
	binary.BigEndian.PutUint32(dst[sizeAt+4:], crc32.ChecksumIEEE(dst[start:]))
	return dst
}

// eachFullRecord decodes every record of a stored batch, keys and values
// included (slices of the batch, or of its inflated records).
func eachFullRecord(batch []byte, h BatchHeader, limit int64, fn func(kmsg.Record)) error {
	body := batch[BatchHeaderSize:]
	if codec := h.Compression(); codec != 0 {
		r, release, err := decompressor(codec, body)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
		}
		budget := int64(1<<62 - 1)
		if limit > 0 {
			budget = limit
		}
		body, err = io.ReadAll(io.LimitReader(r, budget+1))
		release()
		if err != nil {
			return fmt.Errorf("%w: inflating: %v", ErrCorruptBatch, err)
		}
		if limit > 0 && int64(len(body)) > limit {
			return fmt.Errorf("%w: inflates past %d bytes", ErrCorruptBatch, limit)
		}
	}
	return eachRecordIn(body, fn)
}

// eachRecordIn decodes the records of an uncompressed records body.
func eachRecordIn(body []byte, fn func(kmsg.Record)) error {
	for len(body) > 0 {
		n, w := binary.Varint(body)
		if w <= 0 || n < 0 || n > int64(len(body)-w) {
			return fmt.Errorf("%w: record length out of range", ErrCorruptBatch)
		}
		var r kmsg.Record
		if err := r.ReadFrom(body[:w+int(n)]); err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
		}
		fn(r)
		body = body[w+int(n):]
	}
	return nil
}
