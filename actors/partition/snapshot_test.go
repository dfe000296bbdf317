package partition

import (
	"encoding/json"
	"testing"

	"kaas/state/producers"
	"kaas/storage/partlog"
	"kaas/storage/producersnap"
)

func snapBatch(pid int64, epoch int16, seq int32, n int32, off int64, txn bool) partlog.BatchHeader {
	h := partlog.BatchHeader{Magic: 2, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		LastOffsetDelta: n - 1, NumRecords: n, BaseOffset: off, MaxTimestamp: 1000 + off}
	if txn {
		h.Attributes = partlog.AttrTransactional
	}
	return h
}

// R-PV-15: a snapshot round-trips every field.
func TestSnapshotRoundTrip(t *testing.T) {
	s := producers.New(nil)
	for _, h := range []partlog.BatchHeader{snapBatch(1, 2, 0, 3, 0, true), snapBatch(5, 0, 10, 2, 3, false)} {
		if d := s.Check(producerBatch(h)); d.Code != 0 || d.Duplicate != nil {
			t.Fatalf("setup batch %+v: %+v", h, d)
		}
		s.Apply(producerBatch(h))
	}
	b, err := encodeSnapshot(s, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := producers.New(nil)
	off, err := restoreSnapshot(r, b)
	if err != nil || off != 5 {
		t.Fatalf("load: %d %v", off, err)
	}
	if d := r.Check(producerBatch(snapBatch(5, 0, 10, 2, 0, false))); d.Duplicate == nil || d.Duplicate.FirstOffset != 3 {
		t.Fatalf("retry of the last batch after reload: %+v", d)
	}
	if r.OpenTxnFirstOffset() != 0 {
		t.Fatal("open transaction lost")
	}
	// The file is what state/producers wrote before the format moved to
	// storage/producersnap: each producer as its Entry encodes.
	_, ps, err := producersnap.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for pid, p := range ps {
		was, _ := json.Marshal(s.Entry(pid))
		now, _ := json.Marshal(p)
		if string(was) != string(now) {
			t.Errorf("producer %d: snapshot %s, Entry %s", pid, now, was)
		}
	}
	if _, err := restoreSnapshot(r, []byte("{")); err == nil || r.Len() != 2 {
		t.Fatalf("a corrupt snapshot: %v, %d entries left", err, r.Len())
	}
}
