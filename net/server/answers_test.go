package server

// How answers leave a connection: in request order whatever order the
// handler finishes in, and safely when the client has gone before they
// are ready. A stub Handler and a raw TCP client; no broker.

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"kaas/metrics"
)

// Pipelined calls answered last-first, each from its own goroutine, reach
// the client first-first: nothing is written until the first is answered,
// then all of them in request order.
func TestAnswersLeaveInRequestOrder(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	const n = 5
	var want []int32
	for range n {
		want = append(want, c.send(produce()))
	}
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = h.next(t, patience)
	}
	var wg sync.WaitGroup
	for i := n - 1; i >= 1; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls[i].Reply(calls[i].Request.ResponseKind())
		}()
		wg.Wait() // last-first, strictly
	}
	if corr, err := c.readCorr(200 * time.Millisecond); err == nil {
		t.Fatalf("answer %d was written before the first request's", corr)
	}
	go calls[0].Reply(calls[0].Request.ResponseKind())
	for i, w := range want {
		corr, err := c.readCorr(patience)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if corr != w {
			t.Fatalf("answer %d has correlation id %d, want %d", i, corr, w)
		}
	}
}

// Clients that close their connections with requests in flight: one
// with a call waiting on the handler (its call sees Gone), one parked with
// pipelined calls and a request read behind them. Answering the calls
// afterwards neither panics nor reaches anyone, the request never
// dispatched gives its budget back, and Shutdown waits for the late
// answers, then stops every goroutine the server started.
func TestClosingWithRequestsInFlight(t *testing.T) {
	before := serverGoroutines()
	h := newFakeHandler(false)
	s, err := Listen(Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.New()}, h)
	if err != nil {
		t.Fatal(err)
	}
	waiting := dial(t, s)
	waiting.send(metadata())
	calls := []*Call{h.next(t, patience)}
	parked := dial(t, s)
	for range 3 {
		parked.send(produce())
	}
	parked.send(metadata()) // read, then waits behind the produces
	for range 3 {
		calls = append(calls, h.next(t, patience))
	}
	eventually(t, patience, "the metadata request to be read", func() bool { return s.QueuedRequestBytes() > 0 })
	waiting.nc.Close()
	parked.nc.Close()
	select {
	case <-calls[0].Gone():
	case <-time.After(patience):
		t.Fatal("the waiting call never saw its connection go")
	}

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with four calls unanswered", err)
	case <-time.After(100 * time.Millisecond):
	}
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call.Reply(call.Request.ResponseKind())
		}()
	}
	wg.Wait()
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if q := s.QueuedRequestBytes(); q != 0 {
		t.Fatalf("%d request bytes still held after the connections closed", q)
	}
	h.none(t, 50*time.Millisecond, "the request behind the closed connection's calls")
	eventually(t, patience, "the server's goroutines to end", func() bool {
		return len(serverGoroutines()) <= len(before)
	})
}

// serverGoroutines lists the stacks of goroutines running server or gnet
// code (gnet's shared worker pool is process-wide and excluded).
func serverGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "panjf2000/ants") || strings.Contains(g, "serverGoroutines") {
			continue
		}
		if strings.Contains(g, "kaas/net/server.") || strings.Contains(g, "panjf2000/gnet") {
			out = append(out, g)
		}
	}
	return out
}
