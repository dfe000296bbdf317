package partition

import (
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/state/producers"
	"kaas/storage/partlog"
	"kaas/storage/partlog/batchtest"
)

// countingObserver counts appends and fsyncs.
type countingObserver struct {
	appends, syncs, syncedAppends atomic.Int64
}

func (o *countingObserver) Appended(string, int32, int, int) { o.appends.Add(1) }
func (o *countingObserver) Synced(_ time.Duration, n int) {
	o.syncs.Add(1)
	o.syncedAppends.Add(int64(n))
}

type fixture struct {
	h   *Handle
	obs *countingObserver
	sys *system.System
}

func testLogConfig() partlog.Config {
	c := partlog.DefaultConfig()
	c.RetentionMs, c.RetentionBytes, c.SegmentMs = -1, -1, -1
	c.FileDeleteDelay = 0
	return c
}

// open starts a partition actor on dir, stopped when the test ends.
func open(t *testing.T, dir string, mutate ...func(*Config)) *fixture {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := system.New(quiet)
	obs := &countingObserver{}
	cfg := Config{
		Topic: "t", Partition: 0, Dir: dir, Log: testLogConfig(), MaxMessageBytes: 1 << 20,
		Floors: producers.NewFloors(), Logger: quiet, Observer: obs,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := Open(sys, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: h, obs: obs, sys: sys}
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) stop() {
	if f.h != nil {
		f.h.Stop(false)
		f.sys.Shutdown()
		f.h = nil
	}
}

// produce sends a batch and returns a channel with the answer.
func (f *fixture) produce(batch []byte, acks int16) <-chan messages.ProduceResult {
	ch := make(chan messages.ProduceResult, 1)
	f.h.Produce(&messages.Produce{Batch: batch, Acks: acks, Reply: func(r messages.ProduceResult) { ch <- r }})
	return ch
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the partition actor within 10s")
		panic("unreachable")
	}
}

// eventually polls cond until it holds, failing the test with what after
// 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(time.Millisecond)
	}
}

// block parks the actor inside a message until the returned func is
// called, so a test can queue messages behind it deterministically.
func (f *fixture) block() (release func()) {
	entered, gate := make(chan struct{}), make(chan struct{})
	f.h.Send(&messages.DescribeProducers{Reply: func([]messages.ActiveProducer) {
		close(entered)
		<-gate
	}})
	<-entered
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// TestGroupCommit: every append waiting in the mailbox when the actor
// fsyncs is covered by that one fsync, and each acknowledgement is sent
// only once the published high watermark covers its batch.
func TestGroupCommit(t *testing.T) {
	f := open(t, t.TempDir())
	release := f.block()
	const n = 100
	var answers []<-chan messages.ProduceResult
	var early atomic.Int64
	for i := 0; i < n; i++ {
		ch := make(chan messages.ProduceResult, 1)
		f.h.Produce(&messages.Produce{Batch: batchtest.Plain(1, "v"), Acks: -1, Reply: func(r messages.ProduceResult) {
			if f.h.View().HighWatermark < r.BaseOffset+1 {
				early.Add(1) // acknowledged before readers can see (i.e. before fsync)
			}
			ch <- r
		}})
		answers = append(answers, ch)
	}
	release()
	for i, ch := range answers {
		r := wait(t, ch)
		if r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("answer %d: %v at %d", i, kerr.ErrorForCode(r.ErrorCode), r.BaseOffset)
		}
	}
	if early.Load() != 0 {
		t.Fatalf("%d acknowledgements went out before the high watermark covered them", early.Load())
	}
	if s := f.obs.syncs.Load(); s != 1 {
		t.Fatalf("%d fsyncs for %d queued appends, want one group commit", s, n)
	}
	if got := f.obs.syncedAppends.Load(); got != n {
		t.Fatalf("the fsync covered %d appends, want %d", got, n)
	}
}

// TestAcksZeroIsNotHeldForTheFsync: acks=0 has no answer on the wire; the
// actor reports the append at once, before the fsync that follows it.
func TestAcksZeroIsNotHeldForTheFsync(t *testing.T) {
	f := open(t, t.TempDir())
	type seen struct {
		r     messages.ProduceResult
		syncs int64
		hw    int64
	}
	ch := make(chan seen, 1)
	f.h.Produce(&messages.Produce{Batch: batchtest.Plain(1, "v"), Acks: 0, Reply: func(r messages.ProduceResult) {
		ch <- seen{r, f.obs.syncs.Load(), f.h.View().HighWatermark}
	}})
	got := wait(t, ch)
	if got.r.ErrorCode != 0 || got.r.BaseOffset != 0 || got.syncs != 0 || got.hw != 0 {
		t.Fatalf("acks=0 answered %+v after %d fsyncs at high watermark %d; want at once, before any fsync", got.r, got.syncs, got.hw)
	}
}

// TestFlushIntervalMode: with --flush-interval-ms the acknowledgement and
// the high watermark do not wait for an fsync, which runs on the timer.
func TestFlushIntervalMode(t *testing.T) {
	f := open(t, t.TempDir(), func(c *Config) { c.FlushInterval = 50 * time.Millisecond })
	r := wait(t, f.produce(batchtest.Plain(1, "v"), -1))
	if r.ErrorCode != 0 || f.h.View().HighWatermark != 1 {
		t.Fatalf("%v, high watermark %d", kerr.ErrorForCode(r.ErrorCode), f.h.View().HighWatermark)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.obs.syncs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the flush interval never fsynced")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProduceValidation pins the per-batch checks the actor makes before
// producer state: size, CRC, content (spec R-PV-4).
func TestProduceValidation(t *testing.T) {
	f := open(t, t.TempDir(), func(c *Config) { c.MaxMessageBytes = 200 })
	corrupt := batchtest.Plain(1, "v")
	corrupt[len(corrupt)-1] ^= 0xff
	control := batchtest.Build(batchtest.Opts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: 0x20}, "c")
	noSeq := batchtest.Build(batchtest.Opts{ProducerID: 7, ProducerEpoch: 0, BaseSequence: -1}, "v")
	offset := batchtest.Plain(1, "v")
	offset[7] = 5 // base offset 5
	magic1 := batchtest.Plain(1, "v")
	magic1[16] = 1
	for _, tc := range []struct {
		name  string
		batch []byte
		want  int16
	}{
		{"too large for max.message.bytes", batchtest.Plain(1, string(make([]byte, 300))), kerr.MessageTooLarge.Code},
		{"bad CRC", corrupt, kerr.CorruptMessage.Code},
		{"control batch from a client", control, kerr.InvalidRecord.Code},
		{"producer id without a sequence", noSeq, kerr.InvalidRecord.Code},
		{"non-zero base offset", offset, kerr.InvalidRecord.Code},
		{"magic 1", magic1, kerr.InvalidRecord.Code},
		{"length longer than the bytes", batchtest.Plain(1, "v")[:40], kerr.CorruptMessage.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wait(t, f.produce(tc.batch, -1))
			if r.ErrorCode != tc.want || r.BaseOffset != -1 {
				t.Fatalf("%v at %d, want %v", kerr.ErrorForCode(r.ErrorCode), r.BaseOffset, kerr.ErrorForCode(tc.want))
			}
		})
	}
	if v := f.h.View(); v.HighWatermark != 0 || v.Size != 0 {
		t.Fatalf("rejected batches were written: high watermark %d, %d bytes", v.HighWatermark, v.Size)
	}
}

// TestUpdateConfigAndRetention: a config change reaches the log (the next
// append rolls at the new segment.bytes) and a Tick enforces retention.
func TestUpdateConfigAndRetention(t *testing.T) {
	f := open(t, t.TempDir())
	old := time.Now().Add(-time.Hour).UnixMilli()
	for i := 0; i < 3; i++ {
		wait(t, f.produce(batchtest.Plain(old, "v"), -1))
	}
	cfg := testLogConfig()
	cfg.SegmentBytes = 1 // every batch in its own segment
	f.h.Send(&messages.UpdateConfig{Log: cfg, MaxMessageBytes: 1 << 20})
	for i := 0; i < 3; i++ {
		wait(t, f.produce(batchtest.Plain(time.Now().UnixMilli(), "v"), -1))
	}
	cfg.RetentionMs = 60_000
	f.h.Send(&messages.UpdateConfig{Log: cfg, MaxMessageBytes: 1 << 20})
	f.h.Send(messages.Tick{})
	deadline := time.Now().Add(10 * time.Second)
	for f.h.View().LogStart != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("log start %d after retention, want 3 (the hour-old batches gone)", f.h.View().LogStart)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeleteRecordsMessage: -1 means the high watermark; beyond it is
// OFFSET_OUT_OF_RANGE; the answer carries the new low watermark.
func TestDeleteRecordsMessage(t *testing.T) {
	f := open(t, t.TempDir())
	for i := 0; i < 4; i++ {
		wait(t, f.produce(batchtest.Plain(1, "v"), -1))
	}
	del := func(off int64) messages.DeleteRecordsResult {
		ch := make(chan messages.DeleteRecordsResult, 1)
		f.h.Send(&messages.DeleteRecords{Offset: off, Reply: func(r messages.DeleteRecordsResult) { ch <- r }})
		return wait(t, ch)
	}
	if r := del(2); r.ErrorCode != 0 || r.LowWatermark != 2 || f.h.View().LogStart != 2 {
		t.Fatalf("delete before 2: %+v, view starts at %d", r, f.h.View().LogStart)
	}
	if r := del(5); r.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("delete past the high watermark: %+v", r)
	}
	if r := del(-1); r.ErrorCode != 0 || r.LowWatermark != 4 {
		t.Fatalf("delete up to the high watermark: %+v", r)
	}
}

// TestStopMakesEverythingDurable: a stopped partition reopens with every
// acknowledged batch, and a clean shutdown means no recovery scan.
func TestStopMakesEverythingDurable(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, func(c *Config) { c.FlushInterval = time.Hour })
	for i := 0; i < 10; i++ {
		wait(t, f.produce(batchtest.Plain(1, "v"), 1))
	}
	f.stop()
	g := open(t, dir)
	if v := g.h.View(); v.HighWatermark != 10 {
		t.Fatalf("reopened with high watermark %d, want 10", v.HighWatermark)
	}
}

// An acknowledged produce is not kept alive by the partition: its waiter
// slot is cleared once answered. Before, the waiters slice was compacted
// without clearing what it vacated, so each partition's array held its
// last answered replies — and through them the produce requests and the
// frames their batches were decoded from (106 MB after pre-filling 1,000
// partitions in `kaas bench consume`).
func TestAnsweredProduceIsNotRetained(t *testing.T) {
	f := open(t, t.TempDir())
	collected := make(chan struct{})
	ch := make(chan messages.ProduceResult, 1)
	f.h.Produce(&messages.Produce{Batch: batchtest.Plain(1, "v"), Acks: -1, Reply: heldByReply(collected, ch)})
	if r := wait(t, ch); r.ErrorCode != 0 {
		t.Fatalf("produce: %d", r.ErrorCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the answered produce's reply is still reachable")
		}
	}
}

// heldByReply is a reply holding 1 MiB (as a produce's reply holds its
// request frame); collected is closed once that is garbage.
func heldByReply(collected chan struct{}, ch chan messages.ProduceResult) func(messages.ProduceResult) {
	held := make([]byte, 1<<20)
	runtime.AddCleanup(&held[0], func(struct{}) { close(collected) }, struct{}{})
	return func(r messages.ProduceResult) {
		held[0]++
		ch <- r
	}
}
