package offsetlog

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
	"kaas/storage/durable"
)

var tpA0 = model.TopicPartition{Topic: "a", Partition: 0}

func off(o int64) Offset {
	return Offset{Offset: o, LeaderEpoch: -1, Metadata: "m", CommitTimestamp: 1000, ExpireTimestamp: -1}
}

func plain(recs ...Record) *Entry { return &Entry{Kind: KindPlain, Records: recs} }

func txn(pid int64, epoch int16, recs ...Record) *Entry {
	return &Entry{Kind: KindTxn, ProducerID: pid, Epoch: epoch, Records: recs}
}

func marker(pid int64, epoch int16, commit bool) *Entry {
	k := KindAbort
	if commit {
		k = KindCommit
	}
	return &Entry{Kind: k, ProducerID: pid, Epoch: epoch}
}

func openTestDir(t *testing.T, dir string, opts Options) *Dir {
	t.Helper()
	d, err := OpenDir(durable.Env{DataDir: dir, Logger: slog.New(slog.DiscardHandler)}, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func appendAll(t *testing.T, s *Slot, es ...*Entry) {
	t.Helper()
	for _, e := range es {
		if _, err := s.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

// committed returns group g's committed offset values for a-0 (or -1).
func committed(s *State, g string) int64 {
	if gs := s.Groups[g]; gs != nil {
		if o, ok := gs.Offsets[tpA0]; ok {
			return o.Offset
		}
	}
	return -1
}

// TestReplayRules is R-TXN-13 / R-MRK-5 as the log replays them.
func TestReplayRules(t *testing.T) {
	for _, tc := range []struct {
		name      string
		entries   []*Entry
		want      int64 // committed a-0 of group g
		pending   bool  // g still has staged offsets
		wantEpoch int16 // Epochs[7], -1 if absent
	}{
		{"plain commit", []*Entry{plain(OffsetRecord("g", tpA0, off(5)))}, 5, false, -1},
		{"later plain commit wins", []*Entry{plain(OffsetRecord("g", tpA0, off(5))), plain(OffsetRecord("g", tpA0, off(9)))}, 9, false, -1},
		{"tombstone removes", []*Entry{plain(OffsetRecord("g", tpA0, off(5))), plain(OffsetTombstone("g", tpA0))}, -1, false, -1},
		{"staged is invisible", []*Entry{plain(OffsetRecord("g", tpA0, off(5))), txn(7, 2, OffsetRecord("g", tpA0, off(10)))}, 5, true, 2},
		{"commit marker materialises", []*Entry{txn(7, 2, OffsetRecord("g", tpA0, off(10))), marker(7, 2, true)}, 10, false, 2},
		{"abort marker discards", []*Entry{plain(OffsetRecord("g", tpA0, off(5))), txn(7, 2, OffsetRecord("g", tpA0, off(10))), marker(7, 2, false)}, 5, false, 2},
		{"newer plain commit beats older staged", []*Entry{txn(7, 2, OffsetRecord("g", tpA0, off(10))), plain(OffsetRecord("g", tpA0, off(20))), marker(7, 2, true)}, 20, false, 2},
		{"staged newer than plain wins", []*Entry{plain(OffsetRecord("g", tpA0, off(20))), txn(7, 2, OffsetRecord("g", tpA0, off(10))), marker(7, 2, true)}, 10, false, 2},
		{"marker of another producer leaves staged", []*Entry{txn(7, 2, OffsetRecord("g", tpA0, off(10))), marker(8, 0, true)}, -1, true, 2},
		{"epoch keeps its maximum", []*Entry{txn(7, 3, OffsetRecord("g", tpA0, off(10))), marker(7, 1, false)}, -1, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState()
			for i, e := range tc.entries {
				if err := s.Apply(e, s.NextSeq); err != nil {
					t.Fatalf("entry %d: %v", i, err)
				}
			}
			if got := committed(s, "g"); got != tc.want {
				t.Errorf("committed = %d, want %d", got, tc.want)
			}
			gotPending := s.Groups["g"] != nil && len(s.Groups["g"].Pending) > 0
			if gotPending != tc.pending {
				t.Errorf("pending = %v, want %v", gotPending, tc.pending)
			}
			ep, ok := s.Epochs[7]
			if !ok {
				ep = -1
			}
			if ep != tc.wantEpoch {
				t.Errorf("epoch = %d, want %d", ep, tc.wantEpoch)
			}
		})
	}
}

func TestGroupMetadataAndTombstone(t *testing.T) {
	s := NewState()
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = 3, "consumer", 4
	if err := s.Apply(plain(GroupRecord("g", &v)), 0); err != nil {
		t.Fatal(err)
	}
	if s.Groups["g"] == nil || s.Groups["g"].Metadata.Generation != 4 {
		t.Fatalf("metadata not loaded: %+v", s.Groups["g"])
	}
	if err := s.Apply(plain(GroupTombstone("g")), 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Groups["g"]; ok {
		t.Fatal("group with no metadata and no offsets should be gone")
	}
}

// TestRecoveryCutsTornTail writes frames, tears the last one at every
// possible byte and checks recovery keeps exactly the intact frames and
// that appends continue cleanly after the cut.
func TestRecoveryCutsTornTail(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, dir, Options{})
	s, err := d.Slot(3)
	if err != nil {
		t.Fatal(err)
	}
	appendAll(t, s, plain(OffsetRecord("g", tpA0, off(1))), plain(OffsetRecord("g", tpA0, off(2))))
	intact := s.Size()
	appendAll(t, s, plain(OffsetRecord("g", tpA0, off(3))))
	full := s.Size()
	d.Close()
	path := filepath.Join(dir, FileName(3))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for cut := intact; cut < full; cut++ {
		if err := os.WriteFile(path, data[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		d := openTestDir(t, dir, Options{})
		s, err := d.Slot(3)
		if err != nil {
			t.Fatal(err)
		}
		if s.Size() != intact {
			t.Fatalf("cut at %d: size after recovery %d, want %d", cut, s.Size(), intact)
		}
		if got := committed(s.State(), "g"); got != 2 {
			t.Fatalf("cut at %d: committed %d, want 2", cut, got)
		}
		appendAll(t, s, plain(OffsetRecord("g", tpA0, off(4))))
		d.Close()
		d = openTestDir(t, dir, Options{})
		s, _ = d.Slot(3)
		if got := committed(s.State(), "g"); got != 4 {
			t.Fatalf("cut at %d: after append and reopen committed %d, want 4", cut, got)
		}
		d.Close()
	}
	// A flipped byte inside the last frame is caught by its CRC; after a
	// crash (no seal from a clean close: data[:full]) nothing vouches for
	// it, so it is a torn tail. (After a clean close it is corruption:
	// slotlog's TestCorruptLastRecordAfterCleanClose.)
	corrupt := append([]byte(nil), data[:full]...)
	corrupt[full-3] ^= 0xFF
	if err := os.WriteFile(path, corrupt, 0o644); err != nil {
		t.Fatal(err)
	}
	d = openTestDir(t, dir, Options{})
	s, _ = d.Slot(3)
	if s.Size() != intact || committed(s.State(), "g") != 2 {
		t.Fatalf("corrupt tail: size %d committed %d", s.Size(), committed(s.State(), "g"))
	}
}

// TestCompactionKeepsState appends many overwriting commits so the log
// compacts, and checks the compacted log replays to the same state —
// staged offsets, epochs and the sequence counter included.
func TestCompactionKeepsState(t *testing.T) {
	dir := t.TempDir()
	opts := Options{CompactMinBytes: 4096}
	d := openTestDir(t, dir, opts)
	s, err := d.Slot(0)
	if err != nil {
		t.Fatal(err)
	}
	v := kmsg.NewGroupMetadataValue()
	v.Version, v.ProtocolType, v.Generation = 3, "consumer", 2
	appendAll(t, s, plain(GroupRecord("g", &v)), txn(7, 5, OffsetRecord("g", model.TopicPartition{Topic: "b", Partition: 1}, off(77))))
	compacted := false
	for i := int64(0); i < 500; i++ {
		appendAll(t, s, plain(OffsetRecord("g", tpA0, off(i)), OffsetRecord("h", tpA0, off(i*2))))
		if s.NeedsCompaction() {
			if err := s.Compact(); err != nil {
				t.Fatal(err)
			}
			compacted = true
		}
	}
	if !compacted {
		t.Fatal("log never compacted")
	}
	if s.Size() > 3*4096 {
		t.Fatalf("log is %d bytes after compactions", s.Size())
	}
	want := s.State()
	d.Close()
	d = openTestDir(t, dir, opts)
	s, err = d.Slot(0)
	if err != nil {
		t.Fatal(err)
	}
	got := s.State()
	if !reflect.DeepEqual(got.Groups["g"].Offsets, want.Groups["g"].Offsets) || !reflect.DeepEqual(got.Groups["h"].Offsets, want.Groups["h"].Offsets) {
		t.Fatalf("offsets differ after reopen")
	}
	if !reflect.DeepEqual(got.Groups["g"].Pending, want.Groups["g"].Pending) {
		t.Fatalf("pending differ: %+v vs %+v", got.Groups["g"].Pending, want.Groups["g"].Pending)
	}
	if got.Groups["g"].Metadata == nil || got.Groups["g"].Metadata.Generation != 2 {
		t.Fatal("group metadata lost")
	}
	if got.Epochs[7] != 5 || got.NextSeq != want.NextSeq {
		t.Fatalf("epoch %d nextSeq %d, want 5 and %d", got.Epochs[7], got.NextSeq, want.NextSeq)
	}
	// The staged offset still commits after compaction and a restart.
	appendAll(t, s, marker(7, 5, true))
	if o := s.State().Groups["g"].Offsets[model.TopicPartition{Topic: "b", Partition: 1}]; o.Offset != 77 {
		t.Fatalf("staged offset after commit = %d, want 77", o.Offset)
	}
}
