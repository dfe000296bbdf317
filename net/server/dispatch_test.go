package server

// When the next request on a connection is dispatched: not while a Hold
// is outstanding, and not beyond MaxInflightPerConn, during which the
// connection stops being read and then picks up where it left off.

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// holdingHandler holds the connection on the first call it serves and
// answers that call at once, as handlers that must finish a step before
// the connection's next request may see its effects do.
type holdingHandler struct {
	*fakeHandler
	released chan func()
	first    bool
}

func (h *holdingHandler) Serve(c *Call) {
	if !h.first {
		h.first = true
		h.released <- c.Hold()
		c.Reply(c.Request.ResponseKind())
	}
	h.fakeHandler.Serve(c)
}

// Hold keeps the connection's next request from being dispatched, even
// once the holding call is answered, until release; releasing twice is
// the same as once.
func TestHoldBlocksDispatchUntilReleased(t *testing.T) {
	h := &holdingHandler{fakeHandler: newFakeHandler(false), released: make(chan func(), 1)}
	s := startServer(t, h, nil)
	c := dial(t, s)
	first := c.send(metadata())
	second := c.send(metadata())
	h.next(t, patience)
	if corr, err := c.readCorr(patience); err != nil || corr != first {
		t.Fatalf("the holding call's answer: %d, %v", corr, err)
	}
	h.none(t, 200*time.Millisecond, "the next request while the connection was held")
	release := <-h.released
	release()
	release()
	next := h.next(t, patience)
	if next.CorrelationID != second {
		t.Fatalf("dispatched correlation id %d after the release, want %d", next.CorrelationID, second)
	}
	next.Reply(next.Request.ResponseKind())
	if corr, err := c.readCorr(patience); err != nil || corr != second {
		t.Fatalf("the second answer: %d, %v", corr, err)
	}
}

// With MaxInflightPerConn pipelined requests unanswered the connection
// parks: nothing more is dispatched and its socket is not read. Each
// answer lets it go on, and every request is served and answered in
// order in the end.
func TestBackPressureAtMaxInflight(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, func(c *Config) { c.MaxInflightPerConn = 2 })
	paused := func() float64 { return testutil.ToFloat64(s.cfg.Metrics.PausedConnections) }
	c := dial(t, s)
	const n = 6
	var want []int32
	for range n {
		want = append(want, c.send(produce()))
	}
	inFlight := []*Call{h.next(t, patience), h.next(t, patience)}
	eventually(t, patience, "the connection to stop being read", func() bool { return paused() == 1 })
	h.none(t, 200*time.Millisecond, "a third request with two in flight")
	served := 2
	for len(inFlight) > 0 {
		call := inFlight[0]
		inFlight = inFlight[1:]
		call.Reply(call.Request.ResponseKind())
		if served < n {
			inFlight = append(inFlight, h.next(t, patience))
			served++
		}
	}
	for i, w := range want {
		corr, err := c.readCorr(patience)
		if err != nil || corr != w {
			t.Fatalf("answer %d: correlation id %d (%v), want %d", i, corr, err, w)
		}
	}
	eventually(t, patience, "reads to resume once the connection is idle", func() bool { return paused() == 0 })
}
