package offsetwriter

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/model"
	"kaas/storage/durable"
	"kaas/storage/offsetlog"
	"kaas/storage/slotlog"
)

type syncObserver struct {
	mu      sync.Mutex
	rounds  int
	biggest int
}

func (o *syncObserver) Synced(_ time.Duration, appends int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rounds++
	o.biggest = max(o.biggest, appends)
}

func open(t *testing.T, dir string, obs Observer) (*Handle, []Loaded, *system.System) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	sys := system.New(log)
	h, loaded, err := Open(sys, durable.Env{DataDir: dir, Logger: log}, dir, offsetlog.Options{}, obs, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, loaded, sys
}

func appendWait(t *testing.T, h *Handle, slot int, e offsetlog.Entry) Result {
	t.Helper()
	ch := make(chan Result, 1)
	h.Append(&Append{Slot: slot, Entry: e, Reply: func(r Result) { ch <- r }})
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("append not answered")
		return Result{}
	}
}

func offsetEntry(group string, off int64) offsetlog.Entry {
	return offsetlog.Entry{Kind: offsetlog.KindPlain, Records: []offsetlog.Record{
		offsetlog.OffsetRecord(group, model.TopicPartition{Topic: "t"}, offsetlog.Offset{Offset: off, LeaderEpoch: -1, ExpireTimestamp: -1}),
	}}
}

// TestGroupCommitAcrossGroups: appends from many groups queued together
// are answered after fsync rounds that each cover several of them, and
// every one is durable after a reopen.
func TestGroupCommitAcrossGroups(t *testing.T) {
	dir := t.TempDir()
	obs := &syncObserver{}
	h, _, sys := open(t, dir, obs)
	const n = 200
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		group := string(rune('a' + i%26))
		h.Append(&Append{Slot: i % 50, Entry: offsetEntry(group, int64(i)), Reply: func(r Result) {
			if r.Code != 0 || r.FirstSeq == 0 {
				t.Errorf("append %d: %+v", i, r)
			}
			wg.Done()
		}})
	}
	wg.Wait()
	h.Stop()
	sys.Shutdown()
	obs.mu.Lock()
	if obs.biggest < 2 || obs.rounds >= n {
		t.Errorf("%d fsync rounds for %d appends (largest covered %d): no group commit", obs.rounds, n, obs.biggest)
	}
	obs.mu.Unlock()

	// Each (slot, group) keeps the last offset committed to it.
	want := map[[2]any]int64{}
	for i := 0; i < n; i++ {
		want[[2]any{i % 50, string(rune('a' + i%26))}] = int64(i)
	}
	h, loaded, sys := open(t, dir, nil)
	defer func() { h.Stop(); sys.Shutdown() }()
	if len(loaded) != len(want) {
		t.Fatalf("recovered %d (slot, group) pairs, want %d", len(loaded), len(want))
	}
	for _, l := range loaded {
		o := l.State.Offsets[model.TopicPartition{Topic: "t"}]
		if w := want[[2]any{l.Slot, l.Group}]; o.Offset != w {
			t.Fatalf("slot %d group %s recovered offset %d, want %d", l.Slot, l.Group, o.Offset, w)
		}
	}
}

// TestProducerEpochOnSlot is R-TXN-13 / R-MRK-4 at the writer: staged
// offsets or markers from an epoch older than the slot's last one are
// refused; a marker reports the groups holding the producer's offsets.
func TestProducerEpochOnSlot(t *testing.T) {
	h, _, sys := open(t, t.TempDir(), nil)
	defer func() { h.Stop(); sys.Shutdown() }()
	staged := func(group string, epoch int16) offsetlog.Entry {
		e := offsetEntry(group, 1)
		e.Kind, e.ProducerID, e.Epoch = offsetlog.KindTxn, 9, epoch
		return e
	}
	if r := appendWait(t, h, 3, staged("g", 5)); r.Code != 0 {
		t.Fatalf("staged at epoch 5: %v", kerr.ErrorForCode(r.Code))
	}
	if r := appendWait(t, h, 3, staged("h", 4)); r.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("staged at epoch 4 after 5: %v", kerr.ErrorForCode(r.Code))
	}
	if r := appendWait(t, h, 4, staged("h", 4)); r.Code != 0 {
		t.Fatalf("another slot keeps its own epochs: %v", kerr.ErrorForCode(r.Code))
	}
	if r := appendWait(t, h, 3, offsetlog.Entry{Kind: offsetlog.KindCommit, ProducerID: 9, Epoch: 4}); r.Code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker at epoch 4: %v", kerr.ErrorForCode(r.Code))
	}
	r := appendWait(t, h, 3, offsetlog.Entry{Kind: offsetlog.KindCommit, ProducerID: 9, Epoch: 5})
	if r.Code != 0 || len(r.Groups) != 1 || r.Groups[0] != "g" {
		t.Fatalf("marker at epoch 5: %+v", r)
	}
	if r := appendWait(t, h, 3, offsetlog.Entry{Kind: offsetlog.KindAbort, ProducerID: 9, Epoch: 5}); r.Code != 0 || len(r.Groups) != 0 {
		t.Fatalf("second marker: %+v", r)
	}
}

// TestMarkerDurableWhileLeaseInDoubt: a marker whose fsync finishes after
// the lease fell in doubt is refused (NOT_COORDINATOR) but is in the log,
// and the slot's state has already dropped the producer's staged offsets:
// the answer says so (Durable) and names the groups it completed, because
// the coordinator's retry finds none (a chaos run's group kept offsets
// staged for ever: UNSTABLE_OFFSET_COMMIT, committed offsets behind the
// log's).
func TestMarkerDurableWhileLeaseInDoubt(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	sys := system.New(log)
	dir := t.TempDir()
	// The writer asks the gate once before an append and once when its
	// fsync is done: the fourth question — the marker's fsync — finds the
	// lease in doubt.
	var questions atomic.Int32
	alive := func(int) bool { return questions.Add(1) != 4 }
	h, err := OpenNone(sys, durable.Env{DataDir: dir, Logger: log}, dir, offsetlog.Options{}, nil, alive, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h.Stop(); sys.Shutdown() }()
	if _, err := h.OpenSlot(3, slotlog.Owner{Gen: 1}); err != nil {
		t.Fatal(err)
	}
	staged := offsetEntry("g", 7)
	staged.Kind, staged.ProducerID, staged.Epoch = offsetlog.KindTxn, 9, 0
	if r := appendWait(t, h, 3, staged); r.Code != 0 {
		t.Fatalf("staged offsets: %v", kerr.ErrorForCode(r.Code))
	}
	marker := offsetlog.Entry{Kind: offsetlog.KindCommit, ProducerID: 9, Epoch: 0}
	r := appendWait(t, h, 3, marker)
	if r.Code != kerr.NotCoordinator.Code || !r.Durable || len(r.Groups) != 1 || r.Groups[0] != "g" {
		t.Fatalf("marker fsynced with the lease in doubt: %+v, want NOT_COORDINATOR, durable, groups [g]", r)
	}
	r = appendWait(t, h, 3, marker)
	if r.Code != 0 || r.Durable || len(r.Groups) != 0 {
		t.Fatalf("the retried marker: %+v, want success naming no group (the log has no staged offsets left)", r)
	}
}
