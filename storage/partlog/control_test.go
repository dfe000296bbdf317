package partlog

import (
	"bytes"
	"testing"
)

// R-MRK-3: the marker batch is 78 bytes with the exact layout Apache writes.
func TestBuildMarkerExactLayout(t *testing.T) {
	b := BuildMarker(4398046511104, 2, true, 5, 1700000000000)
	if len(b) != MarkerBatchSize {
		t.Fatalf("marker is %d bytes, want %d", len(b), MarkerBatchSize)
	}
	h, err := ParseBatchHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Length != 66 || h.Attributes != 0x30 || h.BaseSequence != -1 || h.NumRecords != 1 ||
		h.ProducerID != 4398046511104 || h.ProducerEpoch != 2 || h.LastOffsetDelta != 0 ||
		h.BaseTimestamp != 1700000000000 || h.MaxTimestamp != 1700000000000 {
		t.Fatalf("header = %+v", h)
	}
	if !ValidCRC(b) {
		t.Fatal("CRC does not validate")
	}
	if !bytes.Contains(b[BatchHeaderSize:], []byte{0, 0, 0, 1}) || !bytes.HasSuffix(b, []byte{0, 0, 0, 0, 0, 5, 0}) {
		t.Fatalf("record bytes % x", b[BatchHeaderSize:])
	}
	commit, epoch, err := ParseMarker(b)
	if err != nil || !commit || epoch != 5 {
		t.Fatalf("ParseMarker = %v %d %v", commit, epoch, err)
	}
	abort := BuildMarker(7, 0, false, 0, 1)
	if commit, _, _ := ParseMarker(abort); commit {
		t.Fatal("abort marker parsed as commit")
	}
}
