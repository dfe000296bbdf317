package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/metrics"
	"kaas/net/wire"
)

// fakeHandler serves every API kmsg knows at every version. Produce is
// pipelined. Each call is recorded and answered when the test says (or at
// once with autoReply).
type fakeHandler struct {
	autoReply bool

	mu      sync.Mutex
	calls   []*Call
	served  chan *Call
	closing bool // the test is over: answer every call (answerAll)
}

func newFakeHandler(autoReply bool) *fakeHandler {
	return &fakeHandler{autoReply: autoReply, served: make(chan *Call, 1024)}
}

func (h *fakeHandler) Supports(key, version int16) (bool, bool) {
	r := kmsg.RequestForKey(key)
	return r != nil, r != nil && version <= r.MaxVersion()
}

func (h *fakeHandler) UnsupportedVersion(wire.Header) kmsg.Response { return nil }

func (h *fakeHandler) Pipelined(key int16) bool { return key == 0 }

func (h *fakeHandler) Serve(c *Call) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	closing := h.closing
	h.mu.Unlock()
	if h.autoReply || closing {
		c.Reply(c.Request.ResponseKind())
	}
	h.served <- c
}

// next waits for the next call the handler sees.
func (h *fakeHandler) next(t *testing.T, d time.Duration) *Call {
	t.Helper()
	select {
	case c := <-h.served:
		return c
	case <-time.After(d):
		t.Fatalf("no request served within %v", d)
		return nil
	}
}

// none asserts that no call is served within d.
func (h *fakeHandler) none(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case c := <-h.served:
		t.Fatalf("%s: %s (correlation id %d) was served", why, kmsg.NameForKey(c.Key), c.CorrelationID)
	case <-time.After(d):
	}
}

func startServer(t *testing.T, h Handler, tune func(*Config)) *Server {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.New()}
	if tune != nil {
		tune(&cfg)
	}
	s, err := Listen(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if f, ok := h.(interface{ answerAll() }); ok {
		t.Cleanup(f.answerAll) // runs first: Shutdown waits for answers
	}
	return s
}

// answerAll answers every call not answered yet, and every call after it:
// a connection the test closed is an orphan whose last requests are still
// served (orphan.go), after this cleanup has run.
func (h *fakeHandler) answerAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closing = true
	for _, c := range h.calls {
		if !c.Settled() {
			c.Reply(c.Request.ResponseKind())
		}
	}
}

// rawConn is a bare client connection.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	r    *bufio.Reader
	corr int32
}

func dial(t *testing.T, s *Server) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, c.corr)
	c.write(frame)
	return c.corr
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readCorr reads one answer frame and returns its correlation id.
func (c *rawConn) readCorr(d time.Duration) (int32, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(buf)), nil
}

func produce() kmsg.Request {
	r := kmsg.NewPtrProduceRequest()
	r.Acks = 1
	r.SetVersion(9)
	return r
}

func metadata() kmsg.Request {
	r := kmsg.NewPtrMetadataRequest()
	r.SetVersion(12)
	return r
}

// patience is how long a test waits for something that must happen: far
// more than it takes on an idle machine, since the suite shares two cores
// with other builds.
const patience = 30 * time.Second

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
