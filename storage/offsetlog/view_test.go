package offsetlog

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
)

// viewLatest is the view's last record of each key, by key.
func viewLatest(v *View) map[string]ViewRecord {
	out := map[string]ViewRecord{}
	for _, r := range v.Read(nil, 0, 1<<30) {
		out[string(r.Key)] = r
	}
	return out
}

func decodeOffsetKV(t *testing.T, r ViewRecord) (kmsg.OffsetCommitKey, *kmsg.OffsetCommitValue) {
	t.Helper()
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(r.Key); err != nil {
		t.Fatal(err)
	}
	if r.Value == nil {
		return k, nil
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(r.Value); err != nil {
		t.Fatal(err)
	}
	return k, &v
}

// TestViewAsApacheShowsIt: the view is the slot's records, latest per key,
// at offset = sequence number - 1; tombstones stay; a staged offset is
// hidden behind the stable offset until its marker, which shows it
// (commit) or drops it (abort); nothing shows before its fsync; offsets
// are the same after compaction and a reopen.
func TestViewAsApacheShowsIt(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CompactMinBytes: 1}
	d := openTestDir(t, dir, opts)
	s, err := d.Slot(3)
	if err != nil {
		t.Fatal(err)
	}
	gv := kmsg.NewGroupMetadataValue()
	gv.Version, gv.ProtocolType, gv.Generation, gv.CurrentStateTimestamp = 3, "consumer", 4, 777
	appendAll(t, s,
		plain(OffsetRecord("g", tpA0, off(1))),                             // seq 1
		plain(GroupRecord("g", &gv)),                                       // seq 2
		plain(OffsetRecord("g", tpA0, off(2))),                             // seq 3 supersedes 1
		plain(OffsetRecord("h", tpA0, off(9)), OffsetTombstone("h", tpA0)), // 4, 5
	)
	v := s.View()
	if ls, hw, lso := v.Offsets(); ls != 0 || hw != 5 || lso != 5 {
		t.Fatalf("offsets %d %d %d, want 0 5 5", ls, hw, lso)
	}
	recs := v.Read(nil, 0, 1<<20)
	var offs []int64
	for _, r := range recs {
		offs = append(offs, r.Offset)
	}
	if len(offs) != 3 || offs[0] != 1 || offs[1] != 2 || offs[2] != 4 {
		t.Fatalf("offsets shown %v, want [1 2 4] (group metadata, g's latest commit, h's tombstone)", offs)
	}
	if k, val := decodeOffsetKV(t, recs[1]); k.Group != "g" || val.Offset != 2 || recs[1].Timestamp != 1000 {
		t.Fatalf("record at 2: %+v %+v ts %d", k, val, recs[1].Timestamp)
	}
	if recs[0].Timestamp != 777 || recs[2].Value != nil {
		t.Fatalf("group metadata ts %d, tombstone value %v", recs[0].Timestamp, recs[2].Value)
	}
	// Reads from the middle, and the byte budget (at least one record).
	if got := v.Read(nil, 2, 1); len(got) != 1 || got[0].Offset != 2 {
		t.Fatalf("read from 2 with 1 byte: %+v", got)
	}

	// Staged: hidden, and the stable offset stops before it.
	appendAll(t, s, txn(7, 1, OffsetRecord("g", model.TopicPartition{Topic: "b", Partition: 0}, off(50)))) // 6
	appendAll(t, s, plain(OffsetRecord("k", tpA0, off(3))))                                                // 7
	if _, hw, lso := v.Offsets(); hw != 7 || lso != 5 {
		t.Fatalf("with a pending offset: hw %d lso %d, want 7 5", hw, lso)
	}
	if got := v.Read(nil, 5, 1<<20); len(got) != 0 {
		t.Fatalf("read past the stable offset: %+v", got)
	}
	appendAll(t, s, marker(7, 1, true)) // 8
	latest := viewLatest(v)
	if r, ok := latest[string(offsetKey("g", model.TopicPartition{Topic: "b", Partition: 0}))]; !ok || r.Offset != 5 {
		t.Fatalf("committed staged offset: %+v %v", r, ok)
	}
	appendAll(t, s, txn(8, 1, OffsetRecord("g", tpA0, off(60))), marker(8, 1, false)) // 9, 10
	if r := viewLatest(v)[string(offsetKey("g", tpA0))]; r.Offset != 2 {
		t.Fatalf("aborted offset shown: %+v", r)
	}

	// Not durable, not shown.
	if _, err := s.Append(plain(OffsetRecord("g", tpA0, off(70)))); err != nil {
		t.Fatal(err)
	}
	if _, hw, _ := v.Offsets(); hw != 10 {
		t.Fatalf("hw %d before the fsync, want 10", hw)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	before := v.Read(nil, 0, 1<<20)
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = openTestDir(t, dir, opts)
	s, _ = d.Slot(3)
	after := s.View().Read(nil, 0, 1<<20)
	if len(after) != len(before) {
		t.Fatalf("after compaction and reopen: %d records, before %d", len(after), len(before))
	}
	for i := range before {
		if after[i].Offset != before[i].Offset || !bytes.Equal(after[i].Key, before[i].Key) || !bytes.Equal(after[i].Value, before[i].Value) {
			t.Fatalf("record %d: %+v, before %+v", i, after[i], before[i])
		}
	}
	if _, hw, _ := s.View().Offsets(); hw != 11 {
		t.Fatalf("hw %d after reopen, want 11", hw)
	}
	if g := s.State().Groups["g"]; g == nil || g.Offsets[tpA0].Offset != 70 || g.Offsets[model.TopicPartition{Topic: "b", Partition: 0}].Offset != 50 || g.Metadata == nil {
		t.Fatalf("state after reopen: %+v", g)
	}
}

// TestViewTombstonesExpire: a tombstone is shown for Apache's
// delete.retention.ms, then dropped.
func TestViewTombstonesExpire(t *testing.T) {
	now := time.Unix(1e6, 0)
	d := openTestDir(t, t.TempDir(), Options{Now: func() time.Time { return now }})
	s, _ := d.Slot(0)
	appendAll(t, s, plain(OffsetRecord("g", tpA0, off(1))), plain(OffsetTombstone("g", tpA0)))
	if n := len(s.View().Read(nil, 0, 1<<20)); n != 1 {
		t.Fatalf("%d records, want the tombstone", n)
	}
	now = now.Add(TombstoneRetention + time.Second)
	if n := len(s.View().Read(nil, 0, 1<<20)); n != 0 {
		t.Fatalf("%d records a day later, want none", n)
	}
	s.View().clean(true)
	if s.View().Len() != 0 {
		t.Fatalf("expired tombstone kept: %d", s.View().Len())
	}
}

// TestViewNumbersOldSnapshots: a log compacted before group metadata kept
// its sequence number (written at 0) gets it numbered once, above every
// offset, and the group is shown.
func TestViewNumbersOldSnapshots(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, dir, Options{})
	s, _ := d.Slot(1)
	gv := kmsg.NewGroupMetadataValue()
	gv.Version, gv.ProtocolType = 3, "consumer"
	// As the old snapshot wrote them: metadata at seq 0, offsets at theirs.
	for _, se := range []SeqEntry{
		{Entry{Kind: KindPlain, Records: []Record{GroupRecord("g", &gv)}}, 0},
		{Entry{Kind: KindPlain, Records: []Record{OffsetRecord("g", tpA0, off(4))}}, 5},
		{Entry{Kind: KindSeqMark}, 9},
	} {
		if err := s.Log().Append(encodeEntry(nil, &se.Entry, se.FirstSeq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Log().Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	for range 2 {
		d = openTestDir(t, dir, Options{})
		s, _ = d.Slot(1)
		recs := s.View().Read(nil, 0, 1<<20)
		if len(recs) != 2 || recs[0].Offset != 4 || recs[1].Offset != 9 {
			t.Fatalf("records %+v, want the offset at 4 and the metadata at 9", recs)
		}
		d.Close()
	}
}
