package partlog

import (
	"slices"
	"testing"
)

// The cases follow Apache's LeaderEpochFileCacheTest.

func TestEpochsAssign(t *testing.T) {
	for _, c := range []struct {
		name string
		from Epochs
		add  EpochEntry
		want Epochs
	}{
		{"first", nil, EpochEntry{2, 6}, Epochs{{2, 6}}},
		{"same epoch later offset is no change", Epochs{{2, 6}}, EpochEntry{2, 10}, Epochs{{2, 6}}},
		{"same epoch earlier offset moves it", Epochs{{2, 6}}, EpochEntry{2, 4}, Epochs{{2, 4}}},
		{"new epoch", Epochs{{2, 6}}, EpochEntry{3, 10}, Epochs{{2, 6}, {3, 10}}},
		{"new epoch at the same offset replaces the empty one", Epochs{{2, 6}, {3, 10}}, EpochEntry{4, 10}, Epochs{{2, 6}, {4, 10}}},
		{"lower epoch truncates what it contradicts", Epochs{{2, 6}, {3, 10}}, EpochEntry{1, 8}, Epochs{{1, 8}}},
		{"negative epoch is ignored", Epochs{{2, 6}}, EpochEntry{-1, 10}, Epochs{{2, 6}}},
	} {
		got, _ := c.from.assign(c.add)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: assign(%v) to %v = %v, want %v", c.name, c.add, c.from, got, c.want)
		}
	}
	// Copy on write: a published slice never changes.
	old := Epochs{{1, 0}, {2, 5}}
	_, _ = old.assign(EpochEntry{3, 5})
	if !slices.Equal(old, Epochs{{1, 0}, {2, 5}}) {
		t.Fatalf("assign changed its receiver: %v", old)
	}
}

func TestEpochsTruncate(t *testing.T) {
	e := Epochs{{2, 6}, {3, 8}, {4, 11}}
	for _, c := range []struct {
		start int64
		want  Epochs
	}{
		{5, Epochs{{2, 6}, {3, 8}, {4, 11}}},
		{6, Epochs{{2, 6}, {3, 8}, {4, 11}}},
		{7, Epochs{{2, 7}, {3, 8}, {4, 11}}},
		{8, Epochs{{3, 8}, {4, 11}}},
		{9, Epochs{{3, 9}, {4, 11}}},
		{15, Epochs{{4, 15}}},
	} {
		if got, _ := e.truncateFromStart(c.start); !slices.Equal(got, c.want) {
			t.Errorf("truncateFromStart(%d) = %v, want %v", c.start, got, c.want)
		}
	}
	for _, c := range []struct {
		end  int64
		want Epochs
	}{
		{12, e},
		{11, Epochs{{2, 6}, {3, 8}}},
		{9, Epochs{{2, 6}, {3, 8}}},
		{8, Epochs{{2, 6}}},
		{0, Epochs{}},
	} {
		if got, _ := e.truncateFromEnd(c.end); !slices.Equal(got, c.want) {
			t.Errorf("truncateFromEnd(%d) = %v, want %v", c.end, got, c.want)
		}
	}
}

func TestEpochsEndOffsetFor(t *testing.T) {
	e := Epochs{{2, 6}, {4, 10}, {7, 13}}
	const logEnd = 20
	for _, c := range []struct {
		requested int32
		epoch     int32
		end       int64
	}{
		{UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{7, 7, logEnd},          // the latest: the log end
		{8, UndefinedEpoch, -1}, // above every epoch
		{4, 4, 13},              // ends where the next starts
		{5, 4, 13},              // between: the largest epoch below it
		{2, 2, 10},              // the first
		{1, 1, 6},               // below every epoch: as asked, the first start
		{0, 0, 6},               // likewise
		{3, 2, 10},              // a gap after the first
		{6, 4, 13},              // a gap before the latest
		{100, UndefinedEpoch, -1} /* far above */} {
		epoch, end := e.EndOffsetFor(c.requested, logEnd)
		if epoch != c.epoch || end != c.end {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", c.requested, epoch, end, c.epoch, c.end)
		}
	}
	if epoch, end := Epochs(nil).EndOffsetFor(0, logEnd); epoch != UndefinedEpoch || end != UndefinedEpochOffset {
		t.Errorf("empty cache: (%d, %d)", epoch, end)
	}
}

func TestEpochsEpochForOffset(t *testing.T) {
	e := Epochs{{2, 6}, {4, 10}}
	for _, c := range []struct {
		offset int64
		epoch  int32
		ok     bool
	}{{5, UndefinedEpoch, false}, {6, 2, true}, {9, 2, true}, {10, 4, true}, {99, 4, true}} {
		if epoch, ok := e.EpochForOffset(c.offset); epoch != c.epoch || ok != c.ok {
			t.Errorf("EpochForOffset(%d) = %d %v, want %d %v", c.offset, epoch, ok, c.epoch, c.ok)
		}
	}
}

func TestEpochsFileFormat(t *testing.T) {
	e := Epochs{{0, 0}, {3, 17}}
	if got := string(e.encode()); got != "0\n2\n0 0\n3 17\n" {
		t.Fatalf("encode = %q", got)
	}
	back, err := parseEpochs(e.encode())
	if err != nil || !slices.Equal(back, e) {
		t.Fatalf("parse(encode) = %v, %v", back, err)
	}
	if got, err := parseEpochs([]byte("0\n0\n")); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n1\n-1 0\n", "0\n2\n3 5\n2 9\n", "0\nx\n", "0\n1\n0 0 0\n"} {
		if _, err := parseEpochs([]byte(bad)); err == nil {
			t.Errorf("parse(%q) succeeded", bad)
		}
	}
}
