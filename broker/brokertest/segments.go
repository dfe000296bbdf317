package brokertest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"kaas/storage/partlog"
)

// CheckWholeBatches fails the test unless every segment file of a
// partition directory is a sequence of whole, CRC-valid batches whose
// offsets continue from one segment to the next: what a log must look
// like after recovery, whatever the crash did. The last segment may end
// in zeros: the room preallocated for its next batches.
func CheckWholeBatches(t testing.TB, partDir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(partDir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s (%v)", partDir, err)
	}
	sort.Strings(files)
	next := int64(-1)
	for _, f := range files {
		data := segmentBatches(t, f, f == files[len(files)-1])
		batches, err := partlog.SplitBatches(data)
		if err != nil {
			t.Fatalf("%s does not end at a batch boundary: %v", f, err)
		}
		for _, b := range batches {
			h, err := partlog.ParseBatchHeader(b)
			if err != nil || !partlog.ValidCRC(b) {
				t.Fatalf("%s: corrupt batch at offset %d", f, h.BaseOffset)
			}
			if next >= 0 && h.BaseOffset != next {
				t.Fatalf("%s: batch at offset %d follows one ending at %d", f, h.BaseOffset, next)
			}
			next = h.NextOffset()
		}
	}
}

// BatchBytes is the bytes of the batches in a partition directory's
// segment files: their length on disk less the zeros preallocated after
// the last segment's last batch (what DescribeLogDirs reports, as
// Apache's log size).
func BatchBytes(t testing.TB, partDir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(partDir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var n int64
	for _, f := range files {
		n += int64(len(segmentBatches(t, f, f == files[len(files)-1])))
	}
	return n
}

// segmentBatches reads a segment file; for the last segment (last) it
// leaves out an all-zero end after its whole batches, the preallocated
// room.
func segmentBatches(t testing.TB, path string, last bool) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := wholeBatches(data); last && len(bytes.Trim(data[n:], "\x00")) == 0 {
		data = data[:n]
	}
	return data
}

// wholeBatches is the length of the whole batches data starts with, by
// their length fields (a zero length ends them: preallocated room).
func wholeBatches(data []byte) int {
	pos := 0
	for pos+12 <= len(data) {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[pos+8:])))
		if size <= 12 || pos+size > len(data) {
			break
		}
		pos += size
	}
	return pos
}
