package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"kaas/net/wire"
)

// A connection waiting for its turn is not read: a client that keeps
// sending fills the kernel's buffers and blocks (TCP pushes back), and
// the broker holds no more than a few read chunks of it (issue 9 row 6:
// 1 GiB of junk behind parked requests grew RSS by 4 GB).
func TestWaitingConnectionIsNotRead(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	c.send(metadata())
	held := h.next(t, patience) // never answered until the end
	c.send(metadata())          // read whole, then waits: the connection parks
	eventually(t, patience, "the connection to park", func() bool {
		return testutil.ToFloat64(s.cfg.Metrics.PausedConnections) == 1
	})

	// 128 MiB of junk: more than the kernel buffers on both sides hold
	// (tcp_rmem/tcp_wmem maxima), so with reads paused the write blocks.
	junk := make([]byte, 128<<20)
	_ = c.nc.SetWriteDeadline(time.Now().Add(1500 * time.Millisecond))
	n, err := c.nc.Write(junk)
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("the client wrote %d MiB without blocking (err %v): the broker went on reading a waiting connection", n>>20, err)
	}
	if got := s.unreadMax.Load(); got > 4*readChunk {
		t.Fatalf("a waiting connection had %d bytes read past its pause; want at most a few %d-byte read chunks", got, readChunk)
	}
	if q := s.QueuedRequestBytes(); q > 1<<20 {
		t.Fatalf("queued request bytes %d: the junk was buffered", q)
	}
	// Another connection is served meanwhile.
	other := dial(t, s)
	other.send(metadata())
	o := h.next(t, patience)
	o.Reply(o.Request.ResponseKind())
	if _, err := other.readCorr(patience); err != nil {
		t.Fatalf("another connection was not answered: %v", err)
	}
	held.Reply(held.Request.ResponseKind())
}

// Partial frames count against queued.max.request.bytes: once the budget
// is spent, a connection that announces another large frame is not read
// until budget comes back, while small requests on other connections go
// on (issue 9 row 9: four connections each holding 100 MB − 1 of a frame
// took 800 MB).
func TestPartialFramesCountAgainstTheBudget(t *testing.T) {
	const frame = 6 << 20
	h := newFakeHandler(true)
	s := startServer(t, h, func(c *Config) { c.QueuedMaxRequestBytes = 8 << 20 })
	partial := func() *rawConn {
		c := dial(t, s)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], frame)
		c.write(b[:])
		// All but the last byte; a connection that is not read blocks in
		// the write, until the test closes it.
		go func() { _, _ = c.nc.Write(make([]byte, frame-1)) }()
		return c
	}
	first, second := partial(), partial()
	eventually(t, patience, "two frames to reserve", func() bool { return s.QueuedRequestBytes() == 2*frame })
	third, fourth := partial(), partial()
	eventually(t, patience, "the later two to wait for budget", func() bool {
		return testutil.ToFloat64(s.cfg.Metrics.PausedConnections) == 2
	})
	if q := s.QueuedRequestBytes(); q != 2*frame {
		t.Fatalf("queued %d bytes with a budget of 8 MiB; want the two admitted frames (%d)", q, 2*frame)
	}
	// Small requests do not wait for budget.
	small := dial(t, s)
	small.send(metadata())
	if _, err := small.readCorr(patience); err != nil {
		t.Fatalf("a small request waited for the budget: %v", err)
	}
	// A closed connection gives its partial frame back; one waiter gets in.
	first.nc.Close()
	eventually(t, patience, "a waiting frame to be admitted", func() bool {
		return testutil.ToFloat64(s.cfg.Metrics.PausedConnections) == 1 && s.QueuedRequestBytes() == 2*frame
	})
	for _, c := range []*rawConn{second, third, fourth} {
		c.nc.Close()
	}
	eventually(t, patience, "every frame to be given back", func() bool { return s.QueuedRequestBytes() == 0 })
}

// max.connections.per.ip: a connection beyond the limit is closed at once
// and counted; the others are served.
func TestMaxConnectionsPerIP(t *testing.T) {
	h := newFakeHandler(true)
	s := startServer(t, h, func(c *Config) { c.MaxConnectionsPerIP = 2 })
	a, b := dial(t, s), dial(t, s)
	eventually(t, patience, "two connections open", func() bool { return s.OpenConnections() == 2 })
	refused := dial(t, s)
	_ = refused.nc.SetReadDeadline(time.Now().Add(patience))
	if _, err := refused.r.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("third connection from one address: read %v, want it closed", err)
	}
	if got := testutil.ToFloat64(s.cfg.Metrics.ConnectionsRefused.WithLabelValues("max_connections_per_ip")); got != 1 {
		t.Fatalf("refused connections counted %v, want 1", got)
	}
	for _, c := range []*rawConn{a, b} {
		c.send(metadata())
		if _, err := c.readCorr(patience); err != nil {
			t.Fatalf("an admitted connection was not served: %v", err)
		}
	}
	a.nc.Close()
	eventually(t, patience, "the closed connection to be forgotten", func() bool { return s.OpenConnections() == 1 })
	again := dial(t, s)
	again.send(metadata())
	if _, err := again.readCorr(patience); err != nil {
		t.Fatalf("a connection after one closed was not served: %v", err)
	}
}

// max.connections: as Apache's acceptor, accepting waits while the limit
// is reached; the waiting connection is served once another closes.
func TestMaxConnectionsWaitsForASlot(t *testing.T) {
	h := newFakeHandler(true)
	s := startServer(t, h, func(c *Config) { c.MaxConnections = 2 })
	a, _ := dial(t, s), dial(t, s)
	eventually(t, patience, "two connections open", func() bool { return s.OpenConnections() == 2 })
	waiting := dial(t, s) // sits in the kernel's backlog
	waiting.send(metadata())
	if _, err := waiting.readCorr(300 * time.Millisecond); err == nil {
		t.Fatal("a connection beyond max.connections was served")
	}
	if testutil.ToFloat64(s.cfg.Metrics.AcceptWaits) < 1 {
		t.Fatal("accept waits not counted")
	}
	a.nc.Close()
	if _, err := waiting.readCorr(patience); err != nil {
		t.Fatalf("the waiting connection was not served after a slot freed: %v", err)
	}
}

// A frame over socket.request.max.bytes closes the connection, counted
// by reason; the broker goes on.
func TestOversizedFrameClosesTheConnection(t *testing.T) {
	h := newFakeHandler(true)
	s := startServer(t, h, func(c *Config) { c.MaxRequestBytes = 1 << 20 })
	c := dial(t, s)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], 1<<20+1)
	c.write(b[:])
	_ = c.nc.SetReadDeadline(time.Now().Add(patience))
	if _, err := c.r.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("oversized frame: read %v, want the connection closed", err)
	}
	if got := testutil.ToFloat64(s.cfg.Metrics.ConnectionsClosed.WithLabelValues("oversized_frame")); got != 1 {
		t.Fatalf("closed connections counted %v, want 1", got)
	}
	if q := s.QueuedRequestBytes(); q != 0 {
		t.Fatalf("queued bytes %d after the close", q)
	}
}

// If the event loops stop without Shutdown, Failed says so: `kaas serve`
// exits non-zero instead of living on deaf (issue 9 row 5).
func TestEventLoopsStoppingIsAFailure(t *testing.T) {
	s := startServer(t, newFakeHandler(true), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.engine.Stop(ctx) // what an engine error would do
	select {
	case err := <-s.Failed():
		if err == nil {
			t.Fatal("nil failure")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event loops stopped and Failed said nothing")
	}
}

// A handler that holds its event loop is logged and reported.
func TestSlowServeIsReported(t *testing.T) {
	stalled := make(chan wire.Header, 1)
	h := &sleepyHandler{fakeHandler: newFakeHandler(true), d: 50 * time.Millisecond}
	s := startServer(t, h, func(c *Config) {
		c.SlowServe = 10 * time.Millisecond
		c.LoopStalled = func(h wire.Header, _ time.Duration) { stalled <- h }
	})
	c := dial(t, s)
	c.send(metadata())
	select {
	case hd := <-stalled:
		if hd.Key != 3 {
			t.Fatalf("stalled key %d", hd.Key)
		}
	case <-time.After(patience):
		t.Fatal("a 50 ms Serve on the loop was not reported")
	}
}

type sleepyHandler struct {
	*fakeHandler
	d time.Duration
}

func (h *sleepyHandler) Serve(c *Call) {
	time.Sleep(h.d)
	h.fakeHandler.Serve(c)
}

func isReset(err error) bool {
	var se *os.SyscallError
	return errors.As(err, &se)
}

// A client that closes its connection while its reads are paused (a call
// in flight, the next request read and waiting) is noticed: the waiting
// call's Gone fires, so a parked long-poll fetch stops early instead of
// holding its place until its wait runs out. What it sent before closing
// is served all the same, as Apache serves it.
func TestGoneFiresWhileReadsArePaused(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	c.send(metadata())
	held := h.next(t, patience)
	c.send(metadata())
	eventually(t, patience, "the connection to park", func() bool {
		return testutil.ToFloat64(s.cfg.Metrics.PausedConnections) == 1
	})
	c.nc.Close()
	select {
	case <-held.Gone():
	case <-time.After(patience):
		t.Fatal("the call in flight never saw its paused connection close")
	}
	eventually(t, patience, "the paused count to drop", func() bool {
		return testutil.ToFloat64(s.cfg.Metrics.PausedConnections) == 0
	})
	// The request the client sent before it closed is still served once
	// its turn comes (orphan.go), with nothing written back.
	held.Reply(held.Request.ResponseKind())
	last := h.next(t, patience)
	last.Reply(last.Request.ResponseKind())
}

// A frame that outgrows its first chunk is given its whole size at once
// (the budget already counts it): growing by doubling left as much
// garbage again as the frame, and six connections sending 100 MiB frames
// peaked at 1 GB RSS instead of 650 MB.
func TestAFrameGrowsToItsSizeAtOnce(t *testing.T) {
	frame := make([]byte, firstChunk)
	const need = 100 << 20
	if got := grow(frame, readChunk, need); cap(got) != need || len(got) != firstChunk {
		t.Fatalf("grown to len %d cap %d, want len %d cap %d", len(got), cap(got), firstChunk, need)
	}
	if got := grow(frame[:10], 10, need); &got[0] != &frame[0] {
		t.Fatal("a frame with room was reallocated")
	}
}

// connections.max.idle.ms: a connection that neither sends nor is written
// to for that long, with nothing in flight, is closed and counted — an
// idle one, and one that announced a large frame and stopped sending
// (whose budget comes back) — while one whose request is being served
// stays until it is answered and then idles out. The sweeps are run by
// the test at a clock two hours ahead, so a slow machine cannot make a
// connection look idle before its request is read.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const idle = time.Hour
	h := newFakeHandler(false)
	s := startServer(t, h, func(c *Config) { c.ConnectionsMaxIdle = idle })
	closedIdle := func() float64 {
		return testutil.ToFloat64(s.cfg.Metrics.ConnectionsClosed.WithLabelValues("idle"))
	}
	sweepLater := func() { s.sweep(time.Now().Add(2*idle), idle) }
	busy := dial(t, s)
	busy.send(metadata())
	held := h.next(t, patience)
	quiet := dial(t, s)
	partial := dial(t, s)
	var prefix [4]byte
	binary.BigEndian.PutUint32(prefix[:], 6<<20)
	partial.write(append(prefix[:], make([]byte, 1000)...))
	eventually(t, patience, "three connections, one frame reserving its budget", func() bool {
		return s.OpenConnections() == 3 && s.QueuedRequestBytes() >= 6<<20
	})

	sweepLater()
	for _, c := range []*rawConn{quiet, partial} {
		_ = c.nc.SetReadDeadline(time.Now().Add(patience))
		if _, err := c.r.ReadByte(); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("an idle connection: read %v, want it closed", err)
		}
	}
	eventually(t, patience, "the partial frame's budget to come back", func() bool { return s.QueuedRequestBytes() < 6<<20 })
	select {
	case <-held.Gone():
		t.Fatal("a connection with a request in flight was closed as idle")
	default:
	}
	if n := closedIdle(); n != 2 {
		t.Fatalf("idle closes counted %v, want 2", n)
	}
	held.Reply(held.Request.ResponseKind())
	if _, err := busy.readCorr(patience); err != nil {
		t.Fatalf("the busy connection's answer: %v", err)
	}
	eventually(t, patience, "the answered connection to idle out", func() bool {
		sweepLater()
		return closedIdle() == 3
	})
}
