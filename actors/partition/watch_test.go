package partition

import (
	"slices"
	"testing"

	"kaas/storage/partlog/batchtest"
)

// TestWatch: a registered Waiter is marked under its index by each
// publish, once however many publishes come before it looks, and not at
// all after Unwatch. Answers go out after the publish, so each check runs
// once the produce is answered.
func TestWatch(t *testing.T) {
	f := open(t, t.TempDir())
	w := NewWaiter(8)
	f.h.Watch(w, 7)

	wait(t, f.produce(batchtest.Plain(1, "a"), -1))
	<-w.C
	if got := w.Changed(); !slices.Equal(got, []int{7}) {
		t.Fatalf("after one publish: changed %v, want [7]", got)
	}
	wait(t, f.produce(batchtest.Plain(1, "b"), -1))
	wait(t, f.produce(batchtest.Plain(1, "c"), -1))
	<-w.C
	if got := w.Changed(); !slices.Equal(got, []int{7}) {
		t.Fatalf("after two publishes: changed %v, want [7] once", got)
	}

	f.h.Unwatch(w)
	wait(t, f.produce(batchtest.Plain(1, "d"), -1))
	if len(w.C) != 0 {
		t.Fatal("woken after Unwatch")
	}
	if got := w.Changed(); len(got) != 0 {
		t.Fatalf("marked after Unwatch: %v", got)
	}
}
