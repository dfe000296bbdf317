package fence

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"kaas/actors/system"
	"kaas/broker/metrics"
	"kaas/broker/producers"
	"kaas/messages"
)

// fakePartition stands in for a partition actor: it records the fences it
// is sent and acknowledges them.
type fakePartition struct {
	mu     sync.Mutex
	fences []messages.FenceProducer
}

func (f *fakePartition) Send(msg any) {
	m, ok := msg.(*messages.FenceProducer)
	if !ok {
		return
	}
	f.mu.Lock()
	f.fences = append(f.fences, *m)
	f.mu.Unlock()
	m.Done()
}

func (f *fakePartition) got() []messages.FenceProducer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messages.FenceProducer(nil), f.fences...)
}

type rig struct {
	t       *testing.T
	sys     *system.System
	h       *Handle
	floors  *producers.Floors
	parts   []*fakePartition
	dataDir string
}

func startRig(t *testing.T, dataDir string, brokerID int32, partitions int) *rig {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &rig{t: t, sys: system.New(logger), floors: producers.NewFloors(), dataDir: dataDir}
	for i := 0; i < partitions; i++ {
		r.parts = append(r.parts, &fakePartition{})
	}
	h, err := Start(r.sys, Config{
		DataDir: dataDir, BrokerID: brokerID,
		PollInterval: time.Hour, // ticks are sent by the test
		Floors:       r.floors,
		Partitions: func() []Target {
			out := make([]Target, len(r.parts))
			for i, p := range r.parts {
				out[i] = p
			}
			return out
		},
		Metrics: metrics.New(),
		Logger:  logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	t.Cleanup(func() {
		h.Stop()
		r.sys.Shutdown()
	})
	return r
}

func (r *rig) fence(pid int64, epoch int16) {
	r.t.Helper()
	errc := make(chan error, 1)
	r.h.Fence(pid, epoch, func(err error) { errc <- err })
	if err := <-errc; err != nil {
		r.t.Fatal(err)
	}
}

// tick runs one poll and returns once the broadcaster has handled it: a
// fence for an unrelated producer queued behind it acts as a barrier.
func (r *rig) tick() {
	r.sys.Send(r.h.pid, pollTick{})
	r.fence(1<<62, 1)
}

func (r *rig) ownFile(brokerID int32) map[string]int16 {
	r.t.Helper()
	raw, err := os.ReadFile(filepath.Join(fenceDir(r.dataDir), fileName(brokerID)))
	if err != nil {
		r.t.Fatal(err)
	}
	var m map[string]int16
	if err := json.Unmarshal(raw, &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

func writePeer(t *testing.T, dataDir string, brokerID int32, content string) {
	t.Helper()
	dir := fenceDir(dataDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fileName(brokerID)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) fencesOf(pid int64) []int16 {
	var out []int16
	for _, f := range r.parts[0].got() {
		if f.ProducerID == pid {
			out = append(out, f.Epoch)
		}
	}
	return out
}

// R-FEN-1/2: a bump reaches every local partition before the caller hears
// back, and raises the broker-wide floor.
func TestFenceFansOutToEveryPartitionBeforeAnswering(t *testing.T) {
	r := startRig(t, t.TempDir(), 0, 50)
	r.fence(42, 3)
	for i, p := range r.parts {
		if got := p.got(); len(got) != 1 || got[0].ProducerID != 42 || got[0].Epoch != 3 {
			t.Fatalf("partition %d saw %+v", i, got)
		}
	}
	if e, ok := r.floors.Get(42); !ok || e != 3 {
		t.Fatalf("floor = %d %v", e, ok)
	}
}

// seed: append_lower_or_equal_epoch_is_noop (R-FEN-4).
func TestAppendLowerOrEqualEpochIsNoop(t *testing.T) {
	r := startRig(t, t.TempDir(), 7, 1)
	r.fence(42, 3)
	path := filepath.Join(fenceDir(r.dataDir), fileName(7))
	before, _ := os.Stat(path)
	// Make a rewrite observable even on coarse mtimes.
	old := before.ModTime().Add(-time.Hour)
	os.Chtimes(path, old, old)
	r.fence(42, 3)
	r.fence(42, 2)
	after, _ := os.Stat(path)
	if !after.ModTime().Equal(old) {
		t.Fatal("an equal or lower epoch rewrote the fence file")
	}
	if got := r.ownFile(7); got["42"] != 3 {
		t.Fatalf("file maps 42 to %d, want 3", got["42"])
	}
	if matches, _ := filepath.Glob(filepath.Join(fenceDir(r.dataDir), "*.tmp")); len(matches) != 0 {
		t.Fatalf("temp files left behind: %v", matches)
	}
}

// seed: append_higher_epoch_overwrites (R-FEN-4).
func TestAppendHigherEpochOverwrites(t *testing.T) {
	r := startRig(t, t.TempDir(), 7, 1)
	r.fence(42, 3)
	r.fence(43, 1)
	r.fence(42, 5)
	got := r.ownFile(7)
	if got["42"] != 5 || got["43"] != 1 || len(got) != 2 {
		t.Fatalf("fence file = %v", got)
	}
}

// seed: applies_peer_fences (R-FEN-5).
func TestAppliesPeerFences(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, 0, 3)
	writePeer(t, dir, 99, `{"42":5}`)
	r.tick()
	if e, _ := r.floors.Get(42); e != 5 {
		t.Fatalf("floor = %d, want 5", e)
	}
	for i, p := range r.parts {
		found := false
		for _, f := range p.got() {
			found = found || (f.ProducerID == 42 && f.Epoch == 5)
		}
		if !found {
			t.Fatalf("partition %d never saw the peer's fence", i)
		}
	}
}

// seed: skips_self_file (R-FEN-5): the watcher never re-reads its own file.
func TestSkipsSelfFile(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, 3, 1)
	writePeer(t, dir, 3, `{"42":9}`)
	r.tick()
	r.tick()
	if _, ok := r.floors.Get(42); ok {
		t.Fatal("the broker applied its own fence file while polling")
	}
}

// seed: dedupe_across_ticks (R-FEN-5): each (pid, epoch) applies once.
func TestDedupeAcrossTicks(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, 0, 1)
	writePeer(t, dir, 99, `{"42":5}`)
	r.tick()
	r.tick()
	r.tick()
	if got := r.fencesOf(42); len(got) != 1 {
		t.Fatalf("fence applied %d times: %v", len(got), got)
	}
}

// seed: higher_epoch_after_first_apply_fires_once_more (R-FEN-5).
func TestHigherEpochAfterFirstApplyFiresOnceMore(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, 0, 1)
	writePeer(t, dir, 99, `{"42":5}`)
	r.tick()
	writePeer(t, dir, 99, `{"42":6}`)
	r.tick()
	r.tick()
	if got := r.fencesOf(42); len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Fatalf("fences applied: %v, want [5 6]", got)
	}
}

// R-FEN-5: missing, partial or malformed files are skipped; the rest apply.
func TestToleratesBrokenPeerFiles(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, 0, 1)
	writePeer(t, dir, 97, `{"42":`)
	writePeer(t, dir, 98, `not json at all`)
	writePeer(t, dir, 96, `{"-5":3,"x":1}`)
	writePeer(t, dir, 99, `{"44":2}`)
	os.WriteFile(filepath.Join(fenceDir(dir), "from-95.json.tmp"), []byte(`{"45":9}`), 0o644)
	r.tick()
	if e, _ := r.floors.Get(44); e != 2 {
		t.Fatal("a good peer file was not applied next to broken ones")
	}
	if _, ok := r.floors.Get(45); ok {
		t.Fatal("a temp file was applied")
	}
}

// R-FEN-6: at start-up every fence file, this broker's own included,
// raises the floors before any partition serves.
func TestStartupAppliesAllFenceFiles(t *testing.T) {
	dir := t.TempDir()
	writePeer(t, dir, 99, `{"42":5}`)
	writePeer(t, dir, 0, `{"43":7}`)
	r := startRig(t, dir, 0, 1)
	if e, _ := r.floors.Get(42); e != 5 {
		t.Fatalf("peer fence floor = %d", e)
	}
	if e, _ := r.floors.Get(43); e != 7 {
		t.Fatalf("own fence floor = %d", e)
	}
}

// Two broadcasters sharing a fence directory (two brokers on one volume):
// a bump on one reaches the other's partitions within a poll.
func TestFenceFileRoundTripBetweenBroadcasters(t *testing.T) {
	dir := t.TempDir()
	a := startRig(t, dir, 1, 2)
	b := startRig(t, dir, 2, 2)
	a.fence(42, 4)
	b.tick()
	if e, _ := b.floors.Get(42); e != 4 {
		t.Fatalf("broker 2 floor = %d, want 4", e)
	}
	if got := b.fencesOf(42); len(got) != 1 || got[0] != 4 {
		t.Fatalf("broker 2 partitions saw %v", got)
	}
	b.fence(42, 6)
	a.tick()
	if e, _ := a.floors.Get(42); e != 6 {
		t.Fatalf("broker 1 floor = %d, want 6", e)
	}
}
