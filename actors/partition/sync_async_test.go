package partition

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kaas/messages"
	"kaas/storage/partlog/batchtest"
)

// gatedObserver holds the first fsync's report (made on the goroutine
// that ran the fsync, before its job is handed back) until release.
type gatedObserver struct {
	countingObserver
	entered, gate chan struct{}
	first         atomic.Bool
}

func (o *gatedObserver) Synced(d time.Duration, n int) {
	if o.first.CompareAndSwap(false, true) {
		close(o.entered)
		<-o.gate
	}
	o.countingObserver.Synced(d, n)
}

// TestAppendWhileSyncing: with fsync on, a batch arriving while the group
// commit's fsync runs is written at once (not after that fsync), and no
// batch is acknowledged before an fsync covering it has been taken in.
func TestAppendWhileSyncing(t *testing.T) {
	obs := &gatedObserver{entered: make(chan struct{}), gate: make(chan struct{})}
	f := open(t, t.TempDir(), func(c *Config) { c.Observer = obs })
	var once sync.Once
	release := func() { once.Do(func() { close(obs.gate) }) }
	t.Cleanup(release) // before the fixture's stop, which waits for the fsync
	first := f.produce(batchtest.Plain(1, "a"), -1)
	wait(t, obs.entered) // the first fsync is under way, its report held
	second := f.produce(batchtest.Plain(1, "b"), -1)
	eventually(t, "the second batch was not written while the first fsync ran", func() bool { return obs.appends.Load() >= 2 })
	select {
	case r := <-first:
		t.Fatalf("first batch acknowledged before its fsync was taken in: %+v", r)
	case r := <-second:
		t.Fatalf("second batch acknowledged before any fsync covered it: %+v", r)
	default:
	}
	release()
	for i, ch := range []<-chan messages.ProduceResult{first, second} {
		r := wait(t, ch)
		if r.ErrorCode != 0 || r.BaseOffset != int64(i) {
			t.Fatalf("answer %d: %+v", i, r)
		}
		if hw := f.h.View().HighWatermark; hw < r.BaseOffset+1 {
			t.Fatalf("answer %d at offset %d before the high watermark (%d) covered it", i, r.BaseOffset, hw)
		}
	}
	if n := obs.syncs.Load(); n != 2 {
		t.Fatalf("%d fsyncs, want 2 (one per batch: the second arrived while the first ran)", n)
	}
}
