package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"kaas/storage/partlog/batchtest"
)

// TestLegacyRoundTrip: record batches (plain and compressed with each
// codec, a control batch between them) converted down to magic 0 and 1
// read back as the same offsets, values and (magic 1) timestamps, control
// records left out; converted up again they are one valid magic-2 batch.
func TestLegacyRoundTrip(t *testing.T) {
	var data []byte
	plain := batchtest.Plain(1000, "a", "b")
	SetBaseOffset(plain, 10)
	data = append(data, plain...)
	marker := BuildMarker(5, 0, true, 0, 1002)
	SetBaseOffset(marker, 12)
	data = append(data, marker...)
	next := int64(13)
	for codec := int16(1); codec <= 4; codec++ {
		b := batchtest.Compressed(codec, 2000, []byte(fmt.Sprint("c", codec)), []byte(fmt.Sprint("d", codec)))
		SetBaseOffset(b, next)
		next += 2
		data = append(data, b...)
	}
	for _, magic := range []int8{0, 1} {
		set, err := DownConvert(data, magic, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		msgs, got, err := ParseMessageSet(set, 0)
		if err != nil || got != magic {
			t.Fatalf("magic %d: %v (magic %d)", magic, err, got)
		}
		if len(msgs) != 10 || msgs[0].Offset != 10 || msgs[1].Offset != 11 || msgs[2].Offset != 13 || msgs[9].Offset != 20 {
			t.Fatalf("magic %d: %d messages %+v", magic, len(msgs), msgs)
		}
		if string(msgs[1].Value) != "b" || string(msgs[9].Value) != "d4" {
			t.Fatalf("magic %d: values %q %q", magic, msgs[1].Value, msgs[9].Value)
		}
		wantTS := int64(1001)
		if magic == 0 {
			wantTS = -1
		}
		if msgs[1].Timestamp != wantTS {
			t.Fatalf("magic %d: timestamp %d, want %d", magic, msgs[1].Timestamp, wantTS)
		}
		if capped, _ := DownConvert(data, magic, 1<<20, 1); len(capped) == 0 || len(capped) >= len(set) {
			t.Fatalf("magic %d: capped at 1 byte, %d bytes of %d", magic, len(capped), len(set))
		}
		up := UpConvert(msgs)
		if !ValidCRC(up) {
			t.Fatal("converted batch has a bad CRC")
		}
		if err := WalkRecords(up, 0, nil); err != nil {
			t.Fatalf("converted batch does not walk: %v", err)
		}
	}
}

// TestParseMessageSetRefuses: a CRC mismatch, a size past the end and a
// compressed wrapper inflating past the limit are refused with their
// kinds, never a panic.
func TestParseMessageSetRefuses(t *testing.T) {
	set, _ := DownConvert(batchtest.Plain(1, "hello"), 1, 0, 0)
	bad := bytes.Clone(set)
	bad[len(bad)-1] ^= 1
	var re *RecordError
	if _, _, err := ParseMessageSet(bad, 0); !errors.As(err, &re) || re.Kind != Corrupt {
		t.Fatalf("CRC mismatch: %v", err)
	}
	long := bytes.Clone(set)
	binary.BigEndian.PutUint32(long[8:], 1<<20)
	if _, _, err := ParseMessageSet(long, 0); !errors.As(err, &re) || re.Kind != Corrupt {
		t.Fatalf("size past the end: %v", err)
	}
	for n := 0; n < len(set); n++ {
		_, _, _ = ParseMessageSet(set[:n], 0) // must not panic
	}
	// A gzip wrapper whose inner set is 1 MiB, under a 64 KiB limit.
	inner, _ := DownConvert(batchtest.Plain(1, string(make([]byte, 1<<20))), 1, 0, 0)
	wrapped := wrapper(1, batchtest.Compress(1, inner))
	if _, _, err := ParseMessageSet(wrapped, 64<<10); !errors.As(err, &re) || re.Kind != Undecodable {
		t.Fatalf("inflation past the limit: %v", err)
	}
	if msgs, _, err := ParseMessageSet(wrapped, 0); err != nil || len(msgs) != 1 || len(msgs[0].Value) != 1<<20 {
		t.Fatalf("the compressed wrapper without a limit: %v", err)
	}
}

// wrapper is a magic-1 message whose value is compressed with codec.
func wrapper(codec byte, value []byte) []byte {
	out := appendLegacyMessage(nil, 1, 0, 5, false, nil, value)
	out[8+4+4+1] = codec // attributes, after offset, size, crc, magic
	binary.BigEndian.PutUint32(out[12:], crc32.ChecksumIEEE(out[16:]))
	return out
}
