package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestHeapReleasedAfterOpens: a CreateTopics (through a franz-go admin
// client) that opens partitions is followed, once opens are quiet, by a
// release of the freed heap, and so is a restart that opens them again.
func TestHeapReleasedAfterOpens(t *testing.T) {
	dir := t.TempDir()
	b := startTxnBroker(t, dir)
	if n := b.heapRelease.done.Load(); n != 0 {
		t.Fatalf("%d releases before any partition was opened", n)
	}
	adm := kadm.NewClient(newClient(t, b))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, 8, 1, nil, "released"); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	waitReleases(t, b, 1)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	b = startTxnBroker(t, dir)
	waitReleases(t, b, 1)
}

// TestHeapReleaseSpacing: the first release waits only for the opens to be
// quiet; one after it waits until heapReleaseSpacing has passed.
func TestHeapReleaseSpacing(t *testing.T) {
	var r heapRelease
	now := time.Now()
	if d := r.delay(now); d != heapReleaseQuiet {
		t.Fatalf("first release after %v, want %v", d, heapReleaseQuiet)
	}
	r.last = now
	if d := r.delay(now.Add(10 * time.Second)); d != heapReleaseSpacing-10*time.Second {
		t.Fatalf("release 10 s after the previous one delayed %v, want %v", d, heapReleaseSpacing-10*time.Second)
	}
	if d := r.delay(now.Add(2 * heapReleaseSpacing)); d != heapReleaseQuiet {
		t.Fatalf("release long after the previous one delayed %v, want %v", d, heapReleaseQuiet)
	}
}

// TestHeapReleaseWaitsWhileBusy: a process that allocated more than
// heapReleaseBusy since the timer was armed is serving, and the release
// waits another heapReleaseQuiet; once it allocates less, it runs.
func TestHeapReleaseWaitsWhileBusy(t *testing.T) {
	var allocs atomic.Uint64
	r := heapRelease{allocated: allocs.Load}
	r.mu.Lock()
	r.arm(time.Hour) // fired by hand below
	r.mu.Unlock()
	defer r.stop()
	allocs.Add(heapReleaseBusy + 1)
	r.release()
	if n := r.done.Load(); n != 0 {
		t.Fatalf("%d releases while the process allocated %d bytes in a quiet period, want none", n, heapReleaseBusy+1)
	}
	allocs.Add(heapReleaseBusy / 2)
	r.release()
	if n := r.done.Load(); n != 1 {
		t.Fatalf("%d releases once the process allocated little, want 1", n)
	}
}

func waitReleases(t *testing.T, b *Broker, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.heapRelease.done.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d heap releases, want %d", b.heapRelease.done.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
