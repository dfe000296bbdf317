package txn

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"kaas/messages"
	"kaas/model"
	"kaas/model/txnstate"
)

// gatedStore holds writes back until opened, then hands them to the
// transaction state writer (which completes them on its own goroutine).
type gatedStore struct {
	Store
	mu     sync.Mutex
	open   bool
	queued []func()
	writes int
}

func (g *gatedStore) Persist(e txnstate.Entry, done func(error)) {
	g.gate(func() { g.Store.Persist(e, done) })
}

func (g *gatedStore) PersistLazily(e txnstate.Entry, done func(error)) {
	g.gate(func() { g.Store.PersistLazily(e, done) })
}

func (g *gatedStore) gate(w func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	if g.open {
		w()
		return
	}
	g.queued = append(g.queued, w)
}

// release completes the queued writes and every later one at once.
func (g *gatedStore) release() {
	g.mu.Lock()
	q := g.queued
	g.queued, g.open = nil, true
	g.mu.Unlock()
	for _, w := range q {
		w()
	}
}

func (g *gatedStore) pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queued)
}

// Requests that arrive while a write is outstanding wait for it and then
// see it (R-TXN-2 as when writes blocked the actor): none of them gets
// CONCURRENT_TRANSACTIONS for meeting a half-written transition.
func TestRequestsWaitForAnOutstandingWrite(t *testing.T) {
	var gs *gatedStore
	h := newHarnessWith(t, Config{}, func(st Store) Store {
		gs = &gatedStore{Store: st}
		return gs
	}, entry(0, -1, txnstate.Empty))
	t.Cleanup(gs.release) // before the harness stops the coordinator

	codes := make(chan string, 3)
	h.c.AddPartitions(testID, &messages.AddPartitionsToTxn{ProducerID: testPID, ProducerEpoch: 0,
		Partitions: []model.TopicPartition{tpA0}, Reply: func(code int16, _ []int16) { codes <- "add a-0:" + itoa(code) }})
	deadline := time.Now().Add(10 * time.Second)
	for gs.pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first write never started")
		}
		time.Sleep(time.Millisecond)
	}
	h.c.AddPartitions(testID, &messages.AddPartitionsToTxn{ProducerID: testPID, ProducerEpoch: 0,
		Partitions: []model.TopicPartition{tpA1}, Reply: func(code int16, _ []int16) { codes <- "add a-1:" + itoa(code) }})
	h.c.EndTxn(testID, &messages.EndTxn{ProducerID: testPID, ProducerEpoch: 0, Commit: true, Reply: func(code int16, _ int64, _ int16) { codes <- "end:" + itoa(code) }})
	select {
	case c := <-codes:
		t.Fatalf("answered %s before the first write was durable", c)
	case <-time.After(50 * time.Millisecond):
	}
	if n := gs.pending(); n != 1 {
		t.Fatalf("%d writes started, want 1 (the others wait)", n)
	}
	gs.release()
	for _, want := range []string{"add a-0:0", "add a-1:0", "end:0"} {
		select {
		case got := <-codes:
			if got != want {
				t.Fatalf("answer %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer; want %s", want)
		}
	}
	e := h.wantEntry(testPID, 0, testPID, -1, txnstate.CompleteCommit)
	if len(e.Partitions) != 0 {
		t.Fatalf("entry %+v", e)
	}
	markers := 0
	for _, ev := range h.eventsSoFar() {
		if ev.kind == "marker" && ev.commit {
			markers++
		}
	}
	if markers != 2 {
		t.Fatalf("%d COMMIT markers, want 2 (a-0 and a-1)", markers)
	}
}

func itoa(c int16) string { return strconv.Itoa(int(c)) }
