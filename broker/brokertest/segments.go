package brokertest

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"kaas/storage/partlog"
)

// CheckWholeBatches fails the test unless every segment file of a
// partition directory is a sequence of whole, CRC-valid batches whose
// offsets continue from one segment to the next: what a log must look
// like after recovery, whatever the crash did.
func CheckWholeBatches(t testing.TB, partDir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(partDir, "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s (%v)", partDir, err)
	}
	sort.Strings(files)
	next := int64(-1)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
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
