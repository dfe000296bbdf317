// Package server is the network front end: gnet event loops that cut the
// byte stream into request frames, hand decoded requests to a Handler in
// arrival order, and write answers back in that same order.
package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/wire"
)

// Handler is what the front end needs from the broker.
type Handler interface {
	// Supports reports whether key is an API the broker serves and whether
	// version is within the range it advertises.
	Supports(key, version int16) (known, supported bool)
	// UnsupportedVersion answers a known key at a version outside the
	// range, or returns nil to have the connection closed (Apache answers
	// only ApiVersions this way, KIP-511).
	UnsupportedVersion(h wire.Header) kmsg.Response
	// Serve runs on the connection's event loop, in request order. It must
	// not block: it answers at once or hands the call to actors or
	// goroutines that answer later.
	Serve(c *Call)
}

// Config tunes the front end.
type Config struct {
	Addr               string // host:port; port 0 picks one
	EventLoops         int
	MaxRequestBytes    int // a larger frame closes the connection
	MaxInflightPerConn int // parsing pauses beyond this many unanswered requests
	Logger             *slog.Logger
	// ConnectionsOpen, when set, is told of every open (+1) and close (-1).
	ConnectionsOpen func(delta int)
	// Answered, when set, is told of every answer before it is encoded
	// (resp is nil for a request answered with no bytes, acks=0 produce).
	Answered func(c *Call, resp kmsg.Response)
}

// Server is a running front end.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	handler Handler
	log     *slog.Logger

	engine        gnet.Engine
	addr          net.Addr
	booted        chan struct{}
	stopped       chan error
	draining      atomic.Bool
	drainCh       chan struct{}
	inflight      atomic.Int64
	pendingWrites atomic.Int64
}

// Listen starts the event loops and returns once the port accepts
// connections.
func Listen(cfg Config, h Handler) (*Server, error) {
	if cfg.EventLoops <= 0 {
		cfg.EventLoops = 1
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.MaxInflightPerConn <= 0 {
		cfg.MaxInflightPerConn = 32
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, handler: h, log: cfg.Logger, booted: make(chan struct{}), stopped: make(chan error, 1), drainCh: make(chan struct{})}
	go func() {
		s.stopped <- gnet.Run(s, "tcp://"+cfg.Addr,
			gnet.WithMulticore(true),
			gnet.WithNumEventLoop(cfg.EventLoops),
			gnet.WithReadBufferCap(1<<20),
			gnet.WithWriteBufferCap(1<<20),
			gnet.WithReuseAddr(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(gnetLogger{cfg.Logger}),
		)
	}()
	select {
	case <-s.booted:
		return s, nil
	case err := <-s.stopped:
		if err == nil {
			err = errors.New("event loops stopped before booting")
		}
		return nil, fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
}

// Addr is the bound address (useful when the configured port was 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Draining is closed when Shutdown begins: handlers that wait (long-poll
// fetches) answer with what they have instead of holding the shutdown.
func (s *Server) Draining() <-chan struct{} { return s.drainCh }

// Shutdown stops taking requests, waits until every dispatched request is
// answered and written (or ctx ends), then closes the event loops.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.draining.CompareAndSwap(false, true) {
		close(s.drainCh)
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var waitErr error
wait:
	for s.inflight.Load() > 0 || s.pendingWrites.Load() > 0 {
		select {
		case <-ctx.Done():
			waitErr = fmt.Errorf("shutdown with %d requests unanswered: %w", s.inflight.Load(), ctx.Err())
			break wait
		case <-tick.C:
		}
	}
	// Engine.Stop starts the shutdown and then polls every 500 ms for its
	// end; gnet.Run returning tells us sooner, so Stop gets a context that
	// is already done and we wait on Run instead.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.engine.Stop(now)
	select {
	case err := <-s.stopped:
		if err != nil && waitErr == nil {
			waitErr = err
		}
	case <-time.After(10 * time.Second):
		if waitErr == nil {
			waitErr = errors.New("event loops did not stop within 10s")
		}
	}
	return waitErr
}

func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.engine = eng
	addr, err := boundAddr(eng)
	if err != nil {
		s.log.Error("cannot read the bound listen address", "err", err)
		return gnet.Shutdown
	}
	s.addr = addr
	close(s.booted)
	return gnet.None
}

func boundAddr(eng gnet.Engine) (net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}, nil
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}, nil
	}
	return nil, fmt.Errorf("unexpected socket address %T", sa)
}

func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		return nil, gnet.Close
	}
	remote := "unknown"
	if a := gc.RemoteAddr(); a != nil {
		remote = a.String()
	}
	gc.SetContext(&conn{gc: gc, srv: s, remote: remote, gone: make(chan struct{})})
	if s.cfg.ConnectionsOpen != nil {
		s.cfg.ConnectionsOpen(1)
	}
	return nil, gnet.None
}

func (s *Server) OnClose(gc gnet.Conn, _ error) gnet.Action {
	if cn, ok := gc.Context().(*conn); ok {
		cn.markClosed()
		if s.cfg.ConnectionsOpen != nil {
			s.cfg.ConnectionsOpen(-1)
		}
	}
	return gnet.None
}

// OnTraffic cuts whole frames out of the inbound buffer. A partial frame
// stays buffered; gnet calls again when more bytes arrive, or the
// connection wakes us when it stops being paused.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	cn, ok := gc.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	for !s.draining.Load() && cn.canDispatch() {
		if gc.InboundBuffered() < 4 {
			return gnet.None
		}
		prefix, _ := gc.Peek(4)
		size := int64(int32(binary.BigEndian.Uint32(prefix)))
		if size < 0 || size > int64(s.cfg.MaxRequestBytes) {
			s.log.Warn("closing connection: request frame over --max-request-bytes",
				"remote", cn.remote, "size", size, "max", s.cfg.MaxRequestBytes)
			return gnet.Close
		}
		if int64(gc.InboundBuffered()) < 4+size {
			return gnet.None
		}
		_, _ = gc.Discard(4)
		// gnet's buffer is reused after we return and kmsg decoding aliases
		// its input: the frame is copied once here and owned by the call.
		frame := make([]byte, size)
		if _, err := gc.Read(frame); err != nil {
			return gnet.Close
		}
		if !s.dispatch(cn, frame) {
			return gnet.Close
		}
	}
	return gnet.None
}

// dispatch decodes one frame and hands it to the handler. It returns false
// when the connection must be closed.
func (s *Server) dispatch(cn *conn, frame []byte) (keep bool) {
	h, err := wire.ParseHeader(frame)
	if err != nil {
		s.log.Warn("closing connection: unreadable request header", "remote", cn.remote, "err", err)
		return false
	}
	known, supported := s.handler.Supports(h.Key, h.Version)
	if !known {
		s.log.Warn("closing connection: unknown api key", "remote", cn.remote, "key", h.Key, "version", h.Version)
		return false
	}
	call := &Call{Header: h, Received: time.Now(), Remote: cn.remote, conn: cn, seq: cn.seq}
	if !supported {
		resp := s.handler.UnsupportedVersion(h)
		if resp == nil {
			s.log.Warn("closing connection: unsupported api version", "remote", cn.remote, "key", h.Key, "version", h.Version)
			return false
		}
		cn.seq++
		cn.dispatched()
		call.settled.Store(true)
		cn.complete(call, wire.AppendResponse(nil, h.CorrelationID, resp))
		return true
	}
	h, req, err := wire.ParseRequest(frame)
	if err != nil {
		s.log.Warn("closing connection: undecodable request", "remote", cn.remote, "key", h.Key, "version", h.Version, "err", err)
		return false
	}
	call.Header, call.Request = h, req
	cn.seq++
	cn.dispatched()
	defer func() {
		// The handler recovers its own panics into error answers; this is
		// the last line, for a panic it could not turn into an answer.
		if r := recover(); r != nil {
			s.log.Error("request handler panicked; closing the connection",
				"remote", cn.remote, "key", h.Key, "version", h.Version, "panic", r, "stack", string(debug.Stack()))
			call.NoReply()
			keep = false
		}
	}()
	s.handler.Serve(call)
	return true
}

func (s *Server) wrote(gnet.Conn, error) error {
	s.pendingWrites.Add(-1)
	return nil
}

// gnetLogger routes gnet's own log lines into slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "lib", "gnet") }
