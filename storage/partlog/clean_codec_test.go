package partlog

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/partlog/batchtest"
)

// compressedKeyedBatch is keyedBatch (no producer) with its records
// compressed with codec as a client compresses them.
func compressedKeyedBatch(codec int16, ts int64, recs ...kv) []byte {
	var records []byte
	for i, r := range recs {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: []byte(r.key), Value: []byte(r.value)}
		if r.tombstone {
			rec.Value = nil
		}
		rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
		records = rec.AppendTo(records)
	}
	h := BatchHeader{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts, Attributes: codec}
	return encodeBatch(h, codec, ts, ts+int64(len(recs)-1), int32(len(recs)), batchtest.Compress(codec, records))
}

// TestCleanKeepsTheCodec: a batch that loses some of its records is
// rewritten with the codec it had, as Apache's cleaner does
// (MemoryRecords.filterTo builds the retained records with the original
// batch's compression type), whether its records' bytes are copied or
// re-encoded under a new delete horizon (a tombstone kept): the log of
// a compacted topic whose producers compress does not grow when cleaned,
// and every record reads back as it was, at its offset.
func TestCleanKeepsTheCodec(t *testing.T) {
	for _, codec := range []int16{batchtest.Gzip, batchtest.Snappy, batchtest.Lz4, batchtest.Zstd} {
		t.Run(fmt.Sprint("codec ", codec), func(t *testing.T) {
			cfg := compactConfig()
			cfg.SegmentBytes = 4 << 10
			l := openLog(t, t.TempDir(), cfg)
			orig := map[int64]seen{}
			off := int64(0)
			for b := 0; b < 40; b++ {
				var recs []kv
				for j := 0; j < 8; j++ {
					// Keys shared with the next batches, so each loses
					// some; values that compress well.
					r := kv{key: fmt.Sprintf("k%d", (b*3+j)%50), value: strings.Repeat(fmt.Sprintf("value %d-%d ", b, j), 20)}
					if b == 5 && j == 0 {
						r = kv{key: "gone", tombstone: true}
					}
					recs = append(recs, r)
					orig[off] = seen{off, r.key, r.value, r.tombstone}
					off++
				}
				appendSync(t, l, t0, compressedKeyedBatch(codec, t0.UnixMilli()+int64(100*b), recs...))
			}
			bytesBefore := logBytes(t, l.View())
			before, _ := readRecords(t, l.View())
			check := func(pass string) {
				t.Helper()
				after, hs := readRecords(t, l.View())
				for _, r := range after {
					if orig[r.offset] != r {
						t.Fatalf("%s: offset %d reads %+v, want %+v", pass, r.offset, r, orig[r.offset])
					}
				}
				for _, h := range hs {
					if h.NumRecords > 0 && h.Compression() != int8(codec) {
						t.Fatalf("%s: batch at %d has codec %d, want %d", pass, h.BaseOffset, h.Compression(), codec)
					}
				}
				if got, want := latest(after), latest(before); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: table %v, want %v", pass, got, want)
				}
			}
			res := cleanOnce(t, l, t0, nil, 1<<20)
			if res == nil || res.Stats.RecordsRemoved == 0 || res.nextHorizon == 0 {
				t.Fatalf("first pass removed nothing or stamped no horizon: %+v", res)
			}
			check("first pass")
			if after := logBytes(t, l.View()); after >= bytesBefore {
				t.Fatalf("the log grew from %d to %d bytes", bytesBefore, after)
			}
			// Past the tombstone's horizon: it goes, from a batch whose
			// other records are copied.
			if cleanOnce(t, l, t0.Add(2*time.Second), nil, 1<<20) == nil {
				t.Fatal("no pass once the horizon passed")
			}
			delete(orig, 40) // the tombstone's offset
			check("second pass")
			after, _ := readRecords(t, l.View())
			for _, r := range after {
				if r.tombstone {
					t.Fatalf("tombstone at %d kept past its horizon", r.offset)
				}
			}
		})
	}
}

// logBytes is the size of the batches a reader sees.
func logBytes(t *testing.T, v *View) int {
	t.Helper()
	n := 0
	if err := v.ForEachBatch(v.LogStart, v.HighWatermark, func(b []byte) bool { n += len(b); return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCleanWritesIncompressibleRecordsPlain: a batch whose records did
// not shrink under its codec (random values) is rewritten uncompressed:
// no larger on disk, and no CPU spent compressing it again.
func TestCleanWritesIncompressibleRecordsPlain(t *testing.T) {
	cfg := compactConfig()
	cfg.SegmentBytes = 8 << 10
	l := openLog(t, t.TempDir(), cfg)
	r := rand.New(rand.NewPCG(1, 2))
	for b := 0; b < 20; b++ {
		var recs []kv
		for j := 0; j < 6; j++ {
			v := make([]byte, 100)
			for i := range v {
				v[i] = byte(r.Uint32())
			}
			recs = append(recs, kv{key: fmt.Sprintf("k%d", (b*2+j)%30), value: string(v)})
		}
		appendSync(t, l, t0, compressedKeyedBatch(batchtest.Snappy, t0.UnixMilli()+int64(100*b), recs...))
	}
	before, _ := readRecords(t, l.View())
	bytesBefore := logBytes(t, l.View())
	if res := cleanOnce(t, l, t0, nil, 1<<20); res == nil || res.Stats.RecordsRemoved == 0 {
		t.Fatalf("nothing removed: %+v", res)
	}
	after, hs := readRecords(t, l.View())
	plain := 0
	for _, h := range hs {
		if h.NumRecords > 0 && h.Compression() == 0 {
			plain++
		}
	}
	if plain == 0 {
		t.Fatal("no rewritten batch was written uncompressed")
	}
	if got, want := latest(after), latest(before); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	if n := logBytes(t, l.View()); n >= bytesBefore {
		t.Fatalf("the log grew from %d to %d bytes", bytesBefore, n)
	}
}
