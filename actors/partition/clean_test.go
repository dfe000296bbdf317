package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/partlog"
)

// fakeCleaner keeps the passes submitted, for the test to run.
type fakeCleaner struct {
	mu   sync.Mutex
	jobs []func(partlog.CleanOptions)
	done []error
}

func (c *fakeCleaner) Register(string, func()) {}
func (c *fakeCleaner) Unregister(string)       {}
func (c *fakeCleaner) MarkUncleanable()        {}
func (c *fakeCleaner) Submit(_ float64, run func(partlog.CleanOptions)) {
	c.mu.Lock()
	c.jobs = append(c.jobs, run)
	c.mu.Unlock()
}
func (c *fakeCleaner) Done(_ partlog.CleanStats, err error) {
	c.mu.Lock()
	c.done = append(c.done, err)
	c.mu.Unlock()
}

// next waits for a submitted pass.
func (c *fakeCleaner) next(t *testing.T) func(partlog.CleanOptions) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		if len(c.jobs) > 0 {
			j := c.jobs[0]
			c.jobs = c.jobs[1:]
			c.mu.Unlock()
			return j
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no pass submitted")
		}
		time.Sleep(time.Millisecond)
	}
}

func keyed(key, value string) []byte {
	rec := kmsg.Record{Key: []byte(key), Value: []byte(value)}
	rec.Length = int32(len(rec.AppendTo(nil)) - kbin.VarintLen(0))
	records := rec.AppendTo(nil)
	b := kmsg.RecordBatch{Magic: 2, FirstTimestamp: 1, MaxTimestamp: 1, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: records}
	b.Length = int32(61 - 12 + len(records))
	out := b.AppendTo(nil)
	partlog.SetMaxTimestamp(out, 1) // and the CRC
	return out
}

func cleanedFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cleaned") || strings.HasSuffix(e.Name(), ".swap") {
			out = append(out, e.Name())
		}
	}
	return out
}

// Cluster mode: a pass whose owner's lease is in doubt stops writing — a
// deposed owner's cleaner never creates, renames or removes a file on the
// shared volume — and a pass that finished just before is not swapped in;
// its files are left to the next owner's recovery, which removes them.
func TestCleanerStopsWithTheLease(t *testing.T) {
	dir := t.TempDir()
	var alive atomic.Bool
	alive.Store(true)
	cl := &fakeCleaner{}
	cfgFn := func(c *Config) {
		c.Log.Compact, c.Log.Delete = true, false
		c.Log.SegmentBytes = 300
		c.Log.MinCleanableRatio = 0
		c.Gate = alive.Load
		c.Cleaner = cl
	}
	f := open(t, dir, cfgFn)
	for i := 0; i < 60; i++ {
		if r := wait(t, f.produce(keyed(fmt.Sprint(i%3), fmt.Sprint(i)), -1)); r.ErrorCode != 0 {
			t.Fatalf("produce: %+v", r)
		}
	}
	segments := f.h.View().SegmentCount()
	batches := func() int {
		n := 0
		v := f.h.View()
		if err := v.ForEachBatch(v.LogStart, v.HighWatermark, func([]byte) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The lease goes before the pass writes.
	f.h.Send(cleanCheck{})
	run := cl.next(t)
	alive.Store(false)
	run(partlog.CleanOptions{MapBytes: 1 << 20})
	f.block()()
	if files := cleanedFiles(t, dir); len(files) != 0 {
		t.Fatalf("a pass under a lost lease wrote %v", files)
	}
	if f.h.View().SegmentCount() != segments || f.h.View().Offline != nil {
		t.Fatal("a pass under a lost lease changed the log")
	}

	// The lease goes after the pass, before its swap.
	alive.Store(true)
	f.h.Send(cleanCheck{})
	run = cl.next(t)
	// Hold the actor so the pass's result waits in its mailbox while the
	// gate closes: the swap is decided under a lost lease, every time.
	release := f.block()
	run(partlog.CleanOptions{MapBytes: 1 << 20, MayAct: func() bool { return true }})
	alive.Store(false)
	release()
	f.block()()
	if f.h.View().SegmentCount() != segments {
		t.Fatal("a pass was swapped in under a lost lease")
	}
	if len(cleanedFiles(t, dir)) == 0 {
		t.Fatal("expected the pass's files to be left for the next recovery")
	}

	// The next owner's recovery removes them, and cleans.
	f.stop()
	alive.Store(true)
	f = open(t, dir, cfgFn)
	if files := cleanedFiles(t, dir); len(files) != 0 {
		t.Fatalf("recovery left %v", files)
	}
	f.h.Send(cleanCheck{})
	cl.next(t)(partlog.CleanOptions{MapBytes: 1 << 20})
	f.block()()
	if n := batches(); n >= 30 {
		t.Fatalf("%d batches of 60 (3 keys) after a pass", n)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.cleaned")); len(files) != 0 {
		t.Fatalf("an installed pass left %v", files)
	}
}
