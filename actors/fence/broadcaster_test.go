package fence

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/metrics"
	"kaas/state/producers"
	"kaas/storage/durable"
	"kaas/storage/fencelog"
	"kaas/storage/slotlog"
	"kaas/storage/vfs"
	"kaas/storage/vfs/errorfs"
	"kaas/storage/vfs/memfs"
)

// rig is one broker's broadcaster plus the producer state of a few
// partitions consulting the same floors.
type rig struct {
	t       testing.TB
	sys     *system.System
	h       *Handle
	floors  *producers.Floors
	parts   []*producers.State
	dataDir string
}

func startRig(t testing.TB, dataDir string, brokerID int32, partitions int) *rig {
	return startRigWith(t, dataDir, brokerID, partitions, nil)
}

// startRigWith starts a rig whose configuration adjust may change (the
// clock, the expiration, the filesystem).
func startRigWith(t testing.TB, dataDir string, brokerID int32, partitions int, adjust func(*Config)) *rig {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &rig{t: t, sys: system.New(logger), floors: producers.NewFloors(), dataDir: dataDir}
	for i := 0; i < partitions; i++ {
		r.parts = append(r.parts, producers.New(r.floors))
	}
	cfg := Config{
		DataDir: dataDir, BrokerID: brokerID,
		PollInterval: time.Hour, // ticks are sent by the test
		Floors:       r.floors,
		Metrics:      metrics.New(),
		Logger:       logger,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	h, err := Start(r.sys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	t.Cleanup(r.stop)
	return r
}

// stop stops the rig (again is harmless).
func (r *rig) stop() {
	if r.h != nil {
		r.h.Stop()
		r.sys.Shutdown()
		r.h = nil
	}
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
	m, _, warn, err := fencelog.Read(vfs.OS, filepath.Join(fencelog.Dir(r.dataDir), fencelog.FileName(brokerID)))
	if err != nil || warn != nil {
		r.t.Fatal(err, warn)
	}
	out := map[string]int16{}
	for pid, e := range m {
		out[fmt.Sprint(pid)] = e.Epoch
	}
	return out
}

// writePeer writes a peer's fence file in the legacy JSON form (peers
// running an earlier version write it; it is still read).
func writePeer(t *testing.T, dataDir string, brokerID int32, content string) {
	t.Helper()
	dir := fencelog.Dir(dataDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fencelog.LegacyFileName(brokerID)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// batch is a data batch of producer pid at epoch with base sequence seq.
func batch(pid int64, epoch int16, seq int32) producers.Batch {
	return producers.Batch{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
}

// rejectsBelow reports whether every partition rejects pid's batches at
// epoch-1 and takes a new session at epoch (sequence 0).
func (r *rig) rejectsBelow(pid int64, epoch int16) bool {
	for _, p := range r.parts {
		if p.Check(batch(pid, epoch-1, 1)).Code != kerr.InvalidProducerEpoch.Code || p.Check(batch(pid, epoch, 0)).Code != 0 {
			return false
		}
	}
	return true
}

// appliedFromPeers lists the peer fences the broadcaster applied for pid.
func (r *rig) appliedFromPeers(pid int64) []int16 {
	var out []int16
	for _, in := range r.h.Summary().RecentIn {
		if in.ProducerID == pid {
			out = append(out, in.Epoch)
		}
	}
	return out
}

// R-FEN-1/2/3: when the bump is answered, the producer is fenced on every
// partition — the ones holding its state and the ones that never saw it.
func TestFenceIsInForceEverywhereWhenAnswered(t *testing.T) {
	r := startRig(t, t.TempDir(), 0, 50)
	for _, p := range r.parts[:25] {
		p.Apply(batch(42, 2, 0)) // half the partitions hold the producer's state
	}
	r.fence(42, 3)
	if e, ok := r.floors.Get(42); !ok || e != 3 {
		t.Fatalf("floor = %d %v", e, ok)
	}
	if !r.rejectsBelow(42, 3) {
		t.Fatal("a partition still accepts the zombie epoch or refuses the new session")
	}
	if got := r.h.State().FloorMap["42"]; got != 3 {
		t.Fatalf("inspector floor map shows %d for 42, want 3 (R-FEN-7)", got)
	}
	if d := r.parts[0].Check(batch(42, 3, 1)); d.Code != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("the duplicate window of the old session survived the fence: %+v", d)
	}
}

// seed: append_lower_or_equal_epoch_is_noop (R-FEN-4).
func TestAppendLowerOrEqualEpochIsNoop(t *testing.T) {
	r := startRig(t, t.TempDir(), 7, 1)
	r.fence(42, 3)
	path := filepath.Join(fencelog.Dir(r.dataDir), fencelog.FileName(7))
	before, _ := os.Stat(path)
	r.fence(42, 3)
	r.fence(42, 2)
	after, _ := os.Stat(path)
	if after.Size() != before.Size() {
		t.Fatal("an equal or lower epoch was written to the fence file")
	}
	if got := r.ownFile(7); got["42"] != 3 {
		t.Fatalf("file maps 42 to %d, want 3", got["42"])
	}
	if matches, _ := filepath.Glob(filepath.Join(fencelog.Dir(r.dataDir), ".tmp*")); len(matches) != 0 {
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
	r.parts[0].Apply(batch(42, 0, 0))
	writePeer(t, dir, 99, `{"42":5}`)
	r.tick()
	if e, _ := r.floors.Get(42); e != 5 {
		t.Fatalf("floor = %d, want 5", e)
	}
	if !r.rejectsBelow(42, 5) {
		t.Fatal("the peer's fence is not in force on every partition")
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
	if got := r.appliedFromPeers(42); len(got) != 1 {
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
	if got := r.appliedFromPeers(42); len(got) != 2 || got[0] != 5 || got[1] != 6 {
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
	os.WriteFile(filepath.Join(fencelog.Dir(dir), "from-95.json.tmp"), []byte(`{"45":9}`), 0o644)
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
// a bump on one is in force on the other's partitions after a poll.
func TestFenceFileRoundTripBetweenBroadcasters(t *testing.T) {
	dir := t.TempDir()
	a := startRig(t, dir, 1, 2)
	b := startRig(t, dir, 2, 2)
	b.parts[1].Apply(batch(42, 3, 0))
	a.fence(42, 4)
	b.tick()
	if !b.rejectsBelow(42, 4) {
		t.Fatal("broker 2's partitions do not enforce broker 1's fence")
	}
	b.fence(42, 6)
	a.tick()
	if !a.rejectsBelow(42, 6) {
		t.Fatal("broker 1's partitions do not enforce broker 2's fence")
	}
}

// TestBumpAppendsInsteadOfRewriting is issue 9 row 18: every bump used to
// rewrite and fsync the whole JSON file, so a bump cost time in proportion
// to every producer ever fenced. A bump now appends one fixed-size record,
// whatever the number of entries.
func TestBumpAppendsInsteadOfRewriting(t *testing.T) {
	r := startRig(t, t.TempDir(), 0, 1)
	path := filepath.Join(fencelog.Dir(r.dataDir), fencelog.FileName(0))
	size := func() int64 {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	r.fence(1, 1)
	one := size()
	for pid := int64(2); pid <= 500; pid++ {
		r.fence(pid, 1)
	}
	before := size()
	r.fence(5000, 1)
	if grew := size() - before; grew != one {
		t.Fatalf("a bump with 500 entries wrote %d bytes, the first wrote %d", grew, one)
	}
	if got := r.ownFile(0); len(got) != 501 || got["499"] != 1 {
		t.Fatalf("file holds %d entries", len(got))
	}
}

// TestFencesExpireWithTheirTransactionalID (row 18): the floor map and the
// file no longer grow forever: a fence not bumped for
// transactional.id.expiration.ms leaves the floors at the next poll, is
// not loaded again after a restart, and leaves the file when it compacts.
func TestFencesExpireWithTheirTransactionalID(t *testing.T) {
	dir := t.TempDir()
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func(c *Config) {
		c.Expiration = time.Hour
		c.Now = func() time.Time { return time.UnixMilli(now.Load()) }
	}
	r := startRigWith(t, dir, 0, 1, clock)
	r.fence(42, 3)
	now.Add((30 * time.Minute).Milliseconds())
	r.fence(43, 1)
	now.Add((45 * time.Minute).Milliseconds()) // 42 is 75 minutes old, 43 45
	r.tick()
	if _, ok := r.floors.Get(42); ok {
		t.Fatal("an expired fence is still in the floors")
	}
	if e, ok := r.floors.Get(43); !ok || e != 1 {
		t.Fatal("a live fence was dropped")
	}
	r.stop()
	r = startRigWith(t, dir, 0, 1, clock)
	if _, ok := r.floors.Get(42); ok {
		t.Fatal("an expired fence came back after a restart")
	}
	if _, ok := r.floors.Get(43); !ok {
		t.Fatal("a live fence was lost across a restart")
	}
}

// A peer's log is read while it may be mid-append: a torn last record is
// skipped, every intact one applies.
func TestPeerLogWithTornTail(t *testing.T) {
	dir := t.TempDir()
	var buf []byte
	buf = slotlog.AppendFrame(buf, 0, fencelog.Encode(42, fencelog.Entry{Epoch: 5, At: time.Now().UnixMilli()}))
	buf = slotlog.AppendFrame(buf, int64(len(buf)), fencelog.Encode(43, fencelog.Entry{Epoch: 2, At: time.Now().UnixMilli()}))
	buf = buf[:len(buf)-4]
	if err := os.MkdirAll(fencelog.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fencelog.Dir(dir), fencelog.FileName(9)), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	r := startRig(t, dir, 0, 1)
	if e, _ := r.floors.Get(42); e != 5 {
		t.Fatalf("floor %d, want 5", e)
	}
	if _, ok := r.floors.Get(43); ok {
		t.Fatal("a torn record was applied")
	}
}

// The failure policy of every store: a failed fsync of the fence file
// answers the bump with an error (COORDINATOR_NOT_AVAILABLE upstream), and
// every later bump too, until a restart.
func TestFenceFsyncFailureIsFinal(t *testing.T) {
	efs := errorfs.Wrap(vfs.OS)
	r := startRigWith(t, t.TempDir(), 0, 1, func(c *Config) { c.Env.FS = efs })
	r.fence(1, 1)
	efs.Set(errorfs.Nth(errorfs.On(errorfs.Sync, "from-0"), 1, 1, syscall.EIO))
	for pid := int64(2); pid < 4; pid++ {
		errc := make(chan error, 1)
		r.h.Fence(pid, 1, func(err error) { errc <- err })
		if err := <-errc; err == nil {
			t.Fatalf("bump %d answered without error after the fsync failed", pid)
		}
	}
}

// TestFenceCrashLoop: bumps answered while the fence file is appended to
// (and compacted once it outgrows its live entries), a power loss at a
// random moment keeping a random part of what was not fsynced: a broker
// starting on what the disk would hold has every answered fence in force.
func TestFenceCrashLoop(t *testing.T) {
	memfs.Rounds(t, 12, func(t *testing.T, rnd *rand.Rand) {
		m := memfs.New()
		if err := durable.MkdirAll(m, "/data"); err != nil {
			t.Fatal(err)
		}
		r := startRigWith(t, "/data", 0, 1, func(c *Config) { c.Env.FS, c.Env.DataDir = m, "/data" })
		var mu sync.Mutex
		answered := map[int64]int16{}
		bumps := 200 + rnd.IntN(3000)
		crashAt := rnd.IntN(bumps)
		var crashed *memfs.FS
		var want map[int64]int16
		all := make(chan struct{}, bumps)
		for i := 0; i < bumps; i++ {
			pid, epoch := int64(1+i%20), int16(1+i/20)
			r.h.Fence(pid, epoch, func(err error) {
				if err == nil {
					mu.Lock()
					answered[pid] = max(answered[pid], epoch)
					mu.Unlock()
				}
				all <- struct{}{}
			})
			if i == crashAt {
				mu.Lock()
				crashed, want = m.Crash(memfs.CrashOptions{Rand: rnd}), maps.Clone(answered)
				mu.Unlock()
			}
		}
		for i := 0; i < bumps; i++ {
			<-all
		}
		r.stop()
		again := startRigWith(t, "/data", 0, 1, func(c *Config) { c.Env.FS, c.Env.DataDir = crashed, "/data" })
		for pid, epoch := range want {
			if got, ok := again.floors.Get(pid); !ok || got < epoch {
				t.Fatalf("producer %d: floor %d (%v) after the crash, epoch %d was answered", pid, got, ok, epoch)
			}
		}
	})
}

// TestOwnFenceFileCorruption: damage in the middle of this broker's own
// fence file (records written after it vouch that it was fsynced) refuses
// the start naming the file and offset; with --skip-corrupt the file goes
// to quarantine and every intact fence, before and after the damage, is
// in force again.
func TestOwnFenceFileCorruption(t *testing.T) {
	dir := t.TempDir()
	r := startRig(t, dir, 0, 1)
	r.fence(1, 3)
	path := filepath.Join(fencelog.Dir(dir), fencelog.FileName(0))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	at := st.Size()
	r.fence(2, 4)
	r.fence(3, 5)
	r.stop()
	data, _ := os.ReadFile(path)
	data[at+9] ^= 0x10 // inside the second record
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	cfg := Config{DataDir: dir, PollInterval: time.Hour, Floors: producers.NewFloors(), Metrics: metrics.New(), Logger: logger}
	sys := system.New(logger)
	defer sys.Shutdown()
	_, err = Start(sys, cfg)
	var cerr *durable.CorruptError
	if !errors.As(err, &cerr) || cerr.Path != path || cerr.Offset != at {
		t.Fatalf("start on a damaged fence file: %v, want a CorruptError for %s at %d", err, path, at)
	}
	again := startRigWith(t, dir, 0, 1, func(c *Config) { c.Env.SkipCorrupt, c.Env.DataDir = true, dir })
	for pid, epoch := range map[int64]int16{1: 3, 3: 5} {
		if got, ok := again.floors.Get(pid); !ok || got != epoch {
			t.Fatalf("producer %d: floor %d (%v) after the salvage, want %d", pid, got, ok, epoch)
		}
	}
	if moved, _ := filepath.Glob(filepath.Join(dir, durable.QuarantineDir, "*", "__cluster", "producer_fences", fencelog.FileName(0))); len(moved) != 1 {
		t.Fatalf("quarantined: %v", moved)
	}
}
