package partlog

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"kaas/storage/partlog/batchtest"
)

var plainOpts = batchtest.Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: 1000}

func values(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	return out
}

// Every codec Kafka clients write walks record by record, with offsets and
// timestamps as produced.
func TestWalkRecordsEveryCodec(t *testing.T) {
	for _, codec := range []int16{0, batchtest.Gzip, batchtest.Snappy, batchtest.Lz4, batchtest.Zstd} {
		batch := batchtest.Compressed(codec, 1000, values(50, 300)...)
		var seen []Record
		if err := WalkRecords(batch, 1<<20, func(r Record) bool { seen = append(seen, r); return true }); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if len(seen) != 50 || seen[49].OffsetDelta != 49 || seen[49].Timestamp != 1049 {
			t.Fatalf("codec %d: %d records, last %+v", codec, len(seen), seen[len(seen)-1])
		}
	}
	// Java's xerial-framed snappy too.
	raw := batchtest.Records(values(3, 10)...)
	xerial := append([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}, 0, 0, 0, 0)
	block := batchtest.Compress(batchtest.Snappy, raw)
	xerial = append(xerial[:16], byte(len(block)>>24), byte(len(block)>>16), byte(len(block)>>8), byte(len(block)))
	xerial = append(xerial, block...)
	if err := WalkRecords(batchtest.Raw(plainOpts, batchtest.Snappy, 3, 2, xerial), 1<<20, nil); err != nil {
		t.Fatalf("xerial snappy: %v", err)
	}
}

// A batch whose records contradict its header is refused as Apache's
// record iterator and LogValidator refuse it.
func TestWalkRecordsRefusesLies(t *testing.T) {
	three := batchtest.Records(values(3, 10)...)
	badDeltas := batchtest.Records(values(1, 10)...)
	badDeltas = append(badDeltas, batchtest.Records(values(2, 10)...)...) // deltas 0, 0, 1
	tooLong := append(append([]byte{}, three...), 0)
	short := three[:len(three)-3]
	for _, tc := range []struct {
		name    string
		batch   []byte
		kind    RecordErrorKind
		message string
	}{
		// Issue 9 row 12: a 69-byte batch claiming 2³¹−1 records.
		{"count far above the records", batchtest.Raw(plainOpts, 0, 1<<31-1, 1<<31-2, batchtest.Records(values(1, 1)...)), Malformed, "premature EOF"},
		{"records left after the count", batchtest.Raw(plainOpts, 0, 2, 1, three), Malformed, "still remaining"},
		{"a trailing byte", batchtest.Raw(plainOpts, 0, 3, 2, tooLong), Malformed, "still remaining"},
		{"records cut short", batchtest.Raw(plainOpts, 0, 3, 2, short), Malformed, "invalid record size"},
		{"offset deltas out of order", batchtest.Raw(plainOpts, 0, 3, 2, badDeltas), Malformed, "offset delta"},
		{"compressed count above the records", batchtest.Raw(plainOpts, batchtest.Zstd, 4, 3, batchtest.Compress(batchtest.Zstd, three)), Malformed, "premature EOF"},
		{"garbage zstd", batchtest.Raw(plainOpts, batchtest.Zstd, 3, 2, []byte("definitely not zstd")), Undecodable, "decompress"},
		{"unknown codec", batchtest.Raw(plainOpts, 5, 3, 2, three), Undecodable, "unknown compression"},
	} {
		err := WalkRecords(tc.batch, 1<<20, nil)
		var re *RecordError
		if !errors.As(err, &re) || re.Kind != tc.kind || !bytes.Contains([]byte(re.Msg), []byte(tc.message)) {
			t.Errorf("%s: %v, want kind %d mentioning %q", tc.name, err, tc.kind, tc.message)
		}
	}
}

// A record whose length disagrees with its fields is refused.
func TestWalkRecordsRefusesAWrongRecordLength(t *testing.T) {
	recs := batchtest.Records(values(2, 10)...)
	recs[0] += 2 // the first record's length varint (zig-zag: +1)
	err := WalkRecords(batchtest.Raw(plainOpts, 0, 2, 1, recs), 1<<20, nil)
	var re *RecordError
	if !errors.As(err, &re) || re.Kind != Malformed {
		t.Fatalf("wrong record length: %v", err)
	}
}

// Issue 9 row 7: a small zstd batch inflating to gigabytes. Walking it
// stops at the limit with TooLarge, and never holds the inflated records:
// walking 24 MiB of them allocates a fraction of that (the codec's
// buffers), where inflating whole would allocate all of it.
func TestWalkRecordsInflatesAsAStreamWithinTheLimit(t *testing.T) {
	chunk := 8 << 20
	if raceEnabled {
		chunk = 1 << 20 // instrumented codecs are tens of times slower
	}
	zeros := func() [][]byte { return [][]byte{make([]byte, chunk), make([]byte, chunk), make([]byte, chunk)} }
	big := batchtest.Compressed(batchtest.Zstd, 1000, zeros()...)
	if len(big) > chunk/8 {
		t.Fatalf("the bomb is %d bytes compressed", len(big))
	}
	err := WalkRecords(big, int64(2*chunk), nil)
	var re *RecordError
	if !errors.As(err, &re) || re.Kind != TooLarge {
		t.Fatalf("%d bytes of records with a limit of %d: %v", 3*chunk, 2*chunk, err)
	}
	if raceEnabled {
		return // the allocation check needs inputs well above the codecs' windows
	}
	for _, codec := range []int16{batchtest.Gzip, batchtest.Lz4, batchtest.Zstd} {
		batch := batchtest.Compressed(codec, 1000, zeros()...)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := WalkRecords(batch, 1<<30, nil)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12<<20 {
			t.Fatalf("codec %d: walking 24 MiB of inflated records allocated %d bytes", codec, alloc)
		}
	}
}

// The uncompressed walk runs on every produced batch.
func BenchmarkWalkRecordsUncompressed(b *testing.B) {
	batch := batchtest.Compressed(0, 1000, values(10000, 100)...) // ~1.1 MB of 100-byte records
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := WalkRecords(batch, 1<<30, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecompressIntoSnappy: the cleaner's snappy path decodes raw and
// xerial-framed (two blocks) bodies in place, appending to what the
// buffer holds, and refuses one that inflates past the limit.
func TestDecompressIntoSnappy(t *testing.T) {
	raw := batchtest.Records(values(40, 100)...)
	block := batchtest.Compress(batchtest.Snappy, raw)
	half := len(raw) / 2
	b1, b2 := batchtest.Compress(batchtest.Snappy, raw[:half]), batchtest.Compress(batchtest.Snappy, raw[half:])
	xerial := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for _, b := range [][]byte{b1, b2} {
		xerial = append(xerial, byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b)))
		xerial = append(xerial, b...)
	}
	for name, body := range map[string][]byte{"raw": block, "xerial": xerial} {
		out, err := decompressInto(make([]byte, 0, 8), codecSnappy, body, 1<<20)
		if err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("%s: %v, %d bytes, want %d", name, err, len(out), len(raw))
		}
		if _, err := decompressInto(nil, codecSnappy, body, len(raw)-1); err == nil {
			t.Fatalf("%s: inflating past the limit not refused", name)
		}
		if _, err := decompressInto(nil, codecSnappy, body[:len(body)-3], 1<<20); err == nil {
			t.Fatalf("%s: a truncated body decoded", name)
		}
	}
}
