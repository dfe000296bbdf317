package partlog

import (
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// decompressor handles every codec Kafka clients write (gzip, xerial or raw
// snappy, lz4 frames, zstd); franz-go's is well tested against all of them.
var decompressor = kgo.DefaultDecompressor()

// forEachRecord calls fn with the offset and timestamp of each record in a
// v2 batch, decompressing as needed, until fn returns false. Only the few
// places that need record-level answers (timestamp lookups) pay for this;
// produce and fetch never look inside a batch.
func forEachRecord(batch []byte, fn func(offset, timestamp int64) bool) error {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return err
	}
	if h.Attributes&AttrLogAppendTime != 0 {
		// Every record carries the batch's append time.
		for d := int32(0); d <= h.LastOffsetDelta; d++ {
			if !fn(h.BaseOffset+int64(d), h.MaxTimestamp) {
				return nil
			}
		}
		return nil
	}
	body := batch[BatchHeaderSize:]
	if c := h.Compression(); c != 0 {
		if body, err = decompressor.Decompress(body, kgo.CompressionCodecType(c)); err != nil {
			return err
		}
	}
	for n := int32(0); n < h.NumRecords && len(body) > 0; n++ {
		length, used := kbin.Varint(body)
		if used == 0 || length < 0 || int(length) > len(body)-used {
			return ErrShortBatch
		}
		rec := body[used : used+int(length)]
		body = body[used+int(length):]
		if len(rec) < 1 {
			return ErrShortBatch
		}
		rec = rec[1:] // attributes
		tsDelta, used := kbin.Varlong(rec)
		if used == 0 {
			return ErrShortBatch
		}
		offDelta, used2 := kbin.Varint(rec[used:])
		if used2 == 0 {
			return ErrShortBatch
		}
		if !fn(h.BaseOffset+int64(offDelta), h.BaseTimestamp+tsDelta) {
			return nil
		}
	}
	return nil
}
