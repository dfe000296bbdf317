package server

import (
	"testing"
	"time"
)

// A request is dispatched only once the request before it on the
// connection is answered (Apache's order), so it sees that request's
// effects whatever goroutine or actor served it.
func TestRequestWaitsForTheAnswerBeforeIt(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	first := c.send(metadata())
	c.send(metadata())
	c1 := h.next(t, patience)
	if c1.CorrelationID != first {
		t.Fatalf("first call served has correlation id %d, want %d", c1.CorrelationID, first)
	}
	h.none(t, 200*time.Millisecond, "the second request before the first was answered")
	c1.Reply(c1.Request.ResponseKind())
	if c2 := h.next(t, patience); c2.CorrelationID != first+1 {
		t.Fatalf("second call has correlation id %d", c2.CorrelationID)
	}
}

// Produce requests pipeline (their partitions' mailboxes keep them in
// order), but any other request waits for them, and they wait for it.
func TestProducePipelinesOnlyBehindProduce(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	for range 3 {
		c.send(produce())
	}
	c.send(metadata())
	c.send(produce())
	var produces []*Call
	for range 3 {
		produces = append(produces, h.next(t, patience))
	}
	h.none(t, 200*time.Millisecond, "metadata while produce requests were in flight")
	for _, p := range produces {
		p.Reply(p.Request.ResponseKind())
	}
	m := h.next(t, patience)
	if m.Key != 3 {
		t.Fatalf("served key %d after the produces, want metadata", m.Key)
	}
	h.none(t, 200*time.Millisecond, "produce while metadata was in flight")
	m.Reply(m.Request.ResponseKind())
	if p := h.next(t, patience); p.Key != 0 {
		t.Fatalf("served key %d, want the last produce", p.Key)
	}
	for i := range 4 {
		if _, err := c.readCorr(patience); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
}

// At most MaxInflightPerConn pipelined requests are in flight.
func TestPipelineDepthIsBounded(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, func(c *Config) { c.MaxInflightPerConn = 4 })
	c := dial(t, s)
	for range 6 {
		c.send(produce())
	}
	var calls []*Call
	for range 4 {
		calls = append(calls, h.next(t, patience))
	}
	h.none(t, 200*time.Millisecond, "a fifth produce with four in flight")
	calls[0].Reply(calls[0].Request.ResponseKind())
	h.next(t, patience)
}
