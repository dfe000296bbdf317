package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// noAnswerHandler settles every acks=0 produce with NoReply from another
// goroutine once it is "appended" (as the broker does after the
// partitions answer), and answers everything else at once.
type noAnswerHandler struct{ *fakeHandler }

func (h noAnswerHandler) Serve(c *Call) {
	h.served <- c
	if p, ok := c.Request.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		go c.NoReply()
	} else {
		c.Reply(c.Request.ResponseKind())
	}
}

// Issue 21: a request with no answer gives its in-flight place back once
// settled. Far more acks=0 produces than the in-flight limit on one
// connection are all served, in order, and an answered request after them
// is answered: the read loop used to wake only when an answer was
// written, so the connection parked at the limit for good (32 of 500
// records stored, every later request unanswered).
func TestRequestsWithoutAnswerFreeTheirPlace(t *testing.T) {
	h := noAnswerHandler{newFakeHandler(false)}
	s := startServer(t, h, func(c *Config) { c.MaxInflightPerConn = 4 })
	c := dial(t, s)
	const n = 2000
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for range n {
			p := kmsg.NewPtrProduceRequest()
			p.Acks = 0
			p.SetVersion(9)
			c.send(p)
		}
	}()
	for i := range n {
		got := h.next(t, patience)
		if got.CorrelationID != int32(i+1) {
			t.Fatalf("request %d served with correlation id %d: out of order", i+1, got.CorrelationID)
		}
	}
	<-sent
	want := c.send(metadata())
	h.next(t, patience)
	corr, err := c.readCorr(patience)
	if err != nil || corr != want {
		t.Fatalf("the answer after %d acks=0 produces: correlation id %d, %v; want %d", n, corr, err, want)
	}
}

// A client that sends its last requests and closes at once (kcat with
// acks=0) has them served, as Apache serves a closed channel's staged
// requests: at the close most of them are still unread — in gnet's buffer
// or, behind the paused read, in the kernel's. They used to be dropped
// with the connection.
func TestRequestsSentBeforeTheCloseAreServed(t *testing.T) {
	h := noAnswerHandler{newFakeHandler(false)}
	s := startServer(t, h, func(c *Config) { c.MaxInflightPerConn = 4 })
	c := dial(t, s)
	const n = 500
	for range n {
		p := kmsg.NewPtrProduceRequest()
		p.Acks = 0
		p.SetVersion(9)
		c.send(p)
	}
	c.nc.Close()
	for i := range n {
		got := h.next(t, patience)
		if got.CorrelationID != int32(i+1) {
			t.Fatalf("request %d served with correlation id %d: out of order", i+1, got.CorrelationID)
		}
	}
	eventually(t, patience, "the served requests' budget to come back", func() bool { return s.QueuedRequestBytes() == 0 })
}
