// Package server is the network front end: one accept loop per listener
// with Apache's connection limits, gnet event loops that cut the byte
// stream of plaintext listeners into request frames within a broker-wide
// memory budget — TLS listeners do the same on a reader goroutine per
// connection over crypto/tls (tls.go) — hand decoded requests to a Handler
// in arrival order — each once the requests before it on its connection
// are answered, unless both are pipelined produce requests — and write
// answers back in that same order. Both kinds of connection share the
// Call, ordering, budget and back-pressure machinery (conn.go) through a
// small transport interface.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/metrics"
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

// Pipeliner is implemented by handlers that let some APIs overlap on a
// connection. Without it, every request waits until the one before it is
// answered, as on Apache Kafka.
type Pipeliner interface {
	// Pipelined reports whether requests with API key key may be
	// dispatched while earlier requests of the same key on the connection
	// are unanswered, because the broker keeps their effects in order by
	// itself (produce: each partition's mailbox).
	Pipelined(key int16) bool
}

// Config tunes the front end. Zero values take the defaults noted.
type Config struct {
	// Listeners are the addresses served; empty means one PLAINTEXT
	// listener on Addr.
	Listeners  []Listener
	Addr       string // host:port; port 0 picks one
	EventLoops int    // default 1
	// MaxRequestBytes: a larger frame closes the connection
	// (socket.request.max.bytes, default 100 MiB).
	MaxRequestBytes int
	// MaxUnauthenticatedBytes bounds a frame on a SASL listener before
	// authentication (sasl.server.max.receive.size, default 512 KiB).
	MaxUnauthenticatedBytes int
	// TLSHandshakeTimeout: a TLS client that has not finished its
	// handshake by then is closed (default 10 s).
	TLSHandshakeTimeout time.Duration
	// TLSHandshake, when set, is told of every TLS handshake's outcome.
	TLSHandshake func(listener string, err error)
	// MaxDecodedBytes bounds the memory decoding and answering one request
	// may take, as wire.DecodedSize estimates it before decoding; a larger
	// request closes the connection (default four times MaxRequestBytes).
	MaxDecodedBytes int64
	// MaxInflightPerConn bounds pipelined requests unanswered on one
	// connection (default 32).
	MaxInflightPerConn int
	// MaxConnections (max.connections): at this many open connections,
	// accepting waits until one closes. <= 0: unlimited.
	MaxConnections int
	// MaxConnectionsPerIP (max.connections.per.ip): a connection from an
	// address that has this many open is closed at once. <= 0: unlimited.
	MaxConnectionsPerIP int
	// QueuedMaxRequestBytes (queued.max.request.bytes): request bytes held
	// in memory, read or being read and not yet answered, across every
	// connection; beyond it connections stop being read. <= 0: unlimited.
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle (connections.max.idle.ms): a connection with
	// nothing in flight that has neither sent a byte nor had one written
	// for this long is closed (default 10 minutes; < 0: never). A client
	// that announces a large frame and stops sending holds its share of
	// the request budget only this long.
	ConnectionsMaxIdle time.Duration
	// SlowServe: a Serve call on an event loop taking longer is logged
	// and reported to LoopStalled (default 100 ms).
	SlowServe time.Duration
	// LoopStalled, when set, is told of every slow Serve call (tests fail
	// on it).
	LoopStalled func(h wire.Header, d time.Duration)
	Logger      *slog.Logger
	// Metrics receives the front end's measurements (optional).
	Metrics *metrics.Metrics
	// Answered, when set, is told of every answer before it is encoded
	// (resp is nil for a request answered with no bytes, acks=0 produce).
	Answered func(c *Call, resp kmsg.Response)
}

// Server is a running front end.
type Server struct {
	gnet.BuiltinEventEngine
	cfg       Config
	handler   Handler
	pipeliner Pipeliner
	log       *slog.Logger
	met       netMetrics

	engine   gnet.Engine
	acc      *acceptor
	budget   *budget
	addrs    []net.Addr     // bound address of each listener
	tlsConns sync.WaitGroup // every TLS connection's goroutines
	tlsMu    sync.Mutex
	tlsOpen  map[*tlsTransport]bool
	sessions sync.Map      // id → *Session, every open connection
	booted   chan struct{} // closed once the event loops run
	bootOnce sync.Once
	runDone  chan struct{} // closed when gnet.Run returns
	runErr   error
	failed   chan error
	stopping atomic.Bool

	draining atomic.Bool
	orphans  sync.WaitGroup // closed connections still serving what they sent (orphan.go)
	// orphanMu orders an orphan's orphans.Add against Shutdown's Wait:
	// WaitGroup forbids an Add from zero concurrent with a Wait (the race
	// detector caught it), and an orphan added after the Wait would be
	// served past Shutdown. Held only for a flag check and an Add.
	orphanMu      sync.Mutex
	drainCh       chan struct{}
	inflight      atomic.Int64
	pendingWrites atomic.Int64
	unreadMax     atomic.Int64 // most bytes a parked connection had read past its pause
	conns         sync.Map     // *conn → struct{}: every open connection (the idle sweep)
	sweepStop     chan struct{}
	sweepDone     chan struct{}
}

// Listen starts the event loops and the accept loop and returns once the
// port accepts connections.
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
	if cfg.MaxDecodedBytes <= 0 {
		cfg.MaxDecodedBytes = 4 * int64(cfg.MaxRequestBytes)
	}
	if cfg.SlowServe <= 0 {
		cfg.SlowServe = 100 * time.Millisecond
	}
	if cfg.MaxUnauthenticatedBytes <= 0 {
		cfg.MaxUnauthenticatedBytes = 524288
	}
	if cfg.TLSHandshakeTimeout <= 0 {
		cfg.TLSHandshakeTimeout = 10 * time.Second
	}
	if cfg.ConnectionsMaxIdle == 0 {
		cfg.ConnectionsMaxIdle = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.Listeners) == 0 {
		cfg.Listeners = []Listener{{Name: string(Plaintext), Protocol: Plaintext, Addr: cfg.Addr}}
	}
	var loops []*acceptLoop
	closeAll := func() {
		for _, al := range loops {
			al.ln.Close()
		}
	}
	for _, l := range cfg.Listeners {
		if l.Protocol.TLS() && l.TLS == nil {
			closeAll()
			return nil, fmt.Errorf("listener %s: a TLS listener needs a certificate", l.Name)
		}
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listener %s on %s: %w", l.Name, l.Addr, err)
		}
		loops = append(loops, &acceptLoop{l: l, ln: ln, done: make(chan struct{}), errLog: logEvery{interval: acceptLogInterval}})
	}
	// gnet needs a listener of its own to run; connections come from ours,
	// so it gets a Unix socket in a private directory that nobody dials.
	// The directory goes as soon as the event loops are up (the bound
	// socket lives on without its path), so a killed broker leaves none
	// behind in the temp directory.
	idleDir, err := os.MkdirTemp("", "kaas-gnet-")
	if err != nil {
		closeAll()
		return nil, err
	}
	s := &Server{cfg: cfg, handler: h, log: cfg.Logger, met: netMetrics{cfg.Metrics},
		budget: newBudget(cfg.QueuedMaxRequestBytes),
		booted: make(chan struct{}), runDone: make(chan struct{}), failed: make(chan error, 1), drainCh: make(chan struct{}),
		sweepStop: make(chan struct{}), sweepDone: make(chan struct{})}
	s.pipeliner, _ = h.(Pipeliner)
	go func() {
		s.runErr = gnet.Run(s, "unix://"+filepath.Join(idleDir, "idle.sock"),
			gnet.WithMulticore(true),
			gnet.WithNumEventLoop(cfg.EventLoops),
			gnet.WithLoadBalancing(gnet.LeastConnections),
			gnet.WithReadBufferCap(readChunk),
			gnet.WithWriteBufferCap(1<<20),
			gnet.WithLogger(gnetLogger{cfg.Logger}),
			// The first tick tells us the event loops exist: connections
			// can only be registered from then on.
			gnet.WithTicker(true),
		)
		close(s.runDone)
	}()
	select {
	case <-s.booted:
		os.RemoveAll(idleDir)
	case <-s.runDone:
		closeAll()
		os.RemoveAll(idleDir)
		err := s.runErr
		if err == nil {
			err = errors.New("event loops stopped before booting")
		}
		return nil, fmt.Errorf("starting event loops: %w", err)
	}
	for _, al := range loops {
		s.addrs = append(s.addrs, al.ln.Addr())
	}
	s.acc = newAcceptor(s, loops)
	s.acc.start(s.engine)
	go s.watch()
	go s.sweepIdle()
	return s, nil
}

// readChunk is the most gnet reads from a socket at once (its per-loop
// read buffer).
const readChunk = 256 << 10

// Addr is the first listener's bound address (useful when the configured
// port was 0).
func (s *Server) Addr() net.Addr { return s.addrs[0] }

// Addrs are the bound addresses of every listener, in configuration order.
func (s *Server) Addrs() []net.Addr { return s.addrs }

// Sessions lists the open connections.
func (s *Server) Sessions() []*Session {
	var out []*Session
	s.sessions.Range(func(_, v any) bool {
		out = append(out, v.(*Session))
		return true
	})
	return out
}

// Draining is closed when Shutdown begins: handlers that wait (long-poll
// fetches) answer with what they have instead of holding the shutdown.
func (s *Server) Draining() <-chan struct{} { return s.drainCh }

// Failed delivers an error if the front end stops on its own (the event
// loops end, the listener breaks): the broker can no longer be reached
// and the process should exit rather than live on deaf.
func (s *Server) Failed() <-chan error { return s.failed }

// QueuedRequestBytes is what the request budget holds now.
func (s *Server) QueuedRequestBytes() int64 { return s.budget.used() }

// OpenConnections is the number of connections admitted and not closed.
func (s *Server) OpenConnections() int { return s.acc.openCount() }

// watch reports the event loops ending without Shutdown.
func (s *Server) watch() {
	<-s.runDone
	if !s.stopping.Load() {
		err := s.runErr
		if err == nil {
			err = errors.New("gnet engine shut down")
		}
		s.fail(fmt.Errorf("event loops stopped: %w", err))
	}
}

// fail reports a front end that can no longer serve.
func (s *Server) fail(err error) {
	s.log.Error("network front end failed; the broker cannot be reached", "err", err)
	select {
	case s.failed <- err:
	default:
	}
}

// Shutdown stops taking requests, waits until every dispatched request is
// answered and written (or ctx ends), then closes the event loops.
func (s *Server) Shutdown(ctx context.Context) error {
	s.orphanMu.Lock() // no orphan is added once draining is seen set
	if s.draining.CompareAndSwap(false, true) {
		close(s.drainCh)
	}
	s.orphanMu.Unlock()
	s.stopping.Store(true)
	s.acc.close()
	if s.sweepStop != nil {
		close(s.sweepStop)
		<-s.sweepDone
		s.sweepStop = nil
	}
	s.orphans.Wait() // each stops at its next step once draining
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
	s.stopTLS()
	// Engine.Stop starts the shutdown and then polls every 500 ms for its
	// end; gnet.Run returning tells us sooner, so Stop gets a context that
	// is already done and we wait on Run instead.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.engine.Stop(now)
	select {
	case <-s.runDone:
		if s.runErr != nil && waitErr == nil {
			waitErr = s.runErr
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
	return gnet.None
}

// OnTick runs once, when the event loops are up.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.bootOnce.Do(func() { close(s.booted) })
	return 24 * time.Hour, gnet.None
}

func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	adm, ok := gc.Context().(admission)
	if !ok {
		return nil, gnet.Close // not from our acceptor
	}
	if s.draining.Load() {
		return nil, gnet.Close
	}
	remote := "unknown"
	if a := gc.RemoteAddr(); a != nil {
		remote = a.String()
	}
	cn := &conn{gc: gc, srv: s, remote: remote, ip: adm.ip, gone: make(chan struct{}), epfd: loopEpollFD(gc),
		sess: s.newSession(*adm.l, remote, nil)}
	cn.t = newGnetTransport(gc, s, cn)
	gc.SetContext(cn)
	s.opened(cn)
	return nil, gnet.None
}

func (s *Server) OnClose(gc gnet.Conn, err error) gnet.Action {
	switch c := gc.Context().(type) {
	case *conn:
		if s.addOrphan() {
			if rest, ok := c.orphan(err); ok {
				s.forget(c)
				go c.serveOrphan(rest) // closes it once served
				break
			}
			s.orphans.Done()
		}
		s.closed(c)
	case admission:
		s.acc.closed(c.ip)
	}
	return gnet.None
}

// addOrphan counts a connection that may become an orphan, unless the
// server is draining (Shutdown is then waiting, or about to, on orphans).
func (s *Server) addOrphan() bool {
	s.orphanMu.Lock()
	defer s.orphanMu.Unlock()
	if s.draining.Load() {
		return false
	}
	s.orphans.Add(1)
	return true
}

// OnTraffic runs when bytes arrive or the connection is woken.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	cn, ok := gc.Context().(*conn)
	if !ok {
		return gnet.Close
	}
	cn.touch()
	if t, ok := cn.t.(*gnetTransport); ok {
		t.noteDrained()
	}
	return cn.pump()
}

// opened registers a new connection.
func (s *Server) opened(cn *conn) {
	cn.touch()
	s.conns.Store(cn, struct{}{})
	s.sessions.Store(cn.sess.ID, cn.sess)
	s.met.open(1)
}

// closed unregisters a closed connection and gives back its place in the
// connection counts.
func (s *Server) closed(cn *conn) {
	cn.markClosed()
	s.forget(cn)
}

// forget unregisters a connection whose socket is closed.
func (s *Server) forget(cn *conn) {
	s.conns.Delete(cn)
	s.sessions.Delete(cn.sess.ID)
	s.met.open(-1)
	s.acc.closed(cn.ip)
}

// decode turns a whole frame into the call to dispatch, holding held bytes
// of the budget. It returns false when the connection must be closed.
func (s *Server) decode(cn *conn, frame []byte, held int64) (*Call, bool) {
	if cn.sess.rawTokens.Load() {
		return rawTokenCall(cn, frame, held), true
	}
	h, err := wire.ParseHeader(frame)
	if err != nil {
		s.closing(cn, "bad_frame", "closing connection: unreadable request header", "err", err)
		s.releaseBudget(held)
		return nil, false
	}
	known, supported := s.handler.Supports(h.Key, h.Version)
	if !known {
		s.closing(cn, "bad_frame", "closing connection: unknown api key", "key", h.Key, "version", h.Version)
		s.releaseBudget(held)
		return nil, false
	}
	call := &Call{Header: h, Received: time.Now(), Remote: cn.remote, Size: len(frame), conn: cn, held: held}
	if !supported {
		call.early = s.handler.UnsupportedVersion(h)
		if call.early == nil {
			s.closing(cn, "bad_frame", "closing connection: unsupported api version", "key", h.Key, "version", h.Version)
			s.releaseBudget(held)
			return nil, false
		}
		return call, true
	}
	if est := wire.DecodedSize(h, frame); est > s.cfg.MaxDecodedBytes {
		s.closing(cn, "decode_limit", "closing connection: decoding and answering the request could take too much memory",
			"key", h.Key, "version", h.Version, "frame_bytes", len(frame), "estimate", est, "limit", s.cfg.MaxDecodedBytes)
		s.releaseBudget(held)
		return nil, false
	} else if est > held {
		// The decoded request and its answer count against the budget
		// until it is answered.
		s.budget.take(est - held)
		s.met.queued(est - held)
		call.held = est
		held = est
	}
	h, req, err := wire.ParseRequest(frame)
	if err != nil {
		s.closing(cn, "bad_frame", "closing connection: undecodable request", "key", h.Key, "version", h.Version, "err", err)
		s.releaseBudget(held)
		return nil, false
	}
	call.Header, call.Request = h, req
	return call, true
}

func (s *Server) pipelined(key int16) bool {
	return s.pipeliner != nil && s.pipeliner.Pipelined(key)
}

// dispatch hands a call whose turn has come to the handler. It returns
// false when the connection must be closed.
func (s *Server) dispatch(cn *conn, call *Call) (keep bool) {
	call.seq = cn.seq
	cn.seq++
	h := call.Header
	if call.early != nil {
		call.settled.Store(true)
		cn.complete(call, wire.AppendResponse(nil, h.CorrelationID, call.early))
		return true
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("request", "remote", cn.remote, "key", h.Key, "version", h.Version, "correlation_id", h.CorrelationID, "client", h.ClientID)
	}
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
	start := time.Now()
	s.handler.Serve(call)
	d := time.Since(start)
	s.met.serve(h.Key, d)
	if d > s.cfg.SlowServe {
		s.log.Warn("a request held its event loop", "key", h.Key, "api", kmsg.NameForKey(h.Key), "took", d, "client", h.ClientID)
		if s.cfg.LoopStalled != nil {
			s.cfg.LoopStalled(h, d)
		}
	}
	return true
}

// maxFrame is the largest frame the connection may send next, and the
// setting that says so: before SASL authentication, Apache's
// sasl.server.max.receive.size.
func (s *Server) maxFrame(cn *conn) (int, string) {
	if !cn.sess.Authenticated() {
		return s.cfg.MaxUnauthenticatedBytes, "sasl.server.max.receive.size before authentication"
	}
	return s.cfg.MaxRequestBytes, "socket.request.max.bytes"
}

// wrote runs on the event loop after each queued write: a write that had
// to wait makes gnet register the connection for reads again, so a paused
// connection is paused again.
func (s *Server) wrote(gc gnet.Conn, err error) error {
	s.pendingWrites.Add(-1)
	if err == nil && gc != nil {
		if cn, ok := gc.Context().(*conn); ok {
			cn.touch()
			if cn.readsOff {
				cn.setReadInterest(false)
			}
		}
	}
	return nil
}

// closing logs why the broker closes a connection and counts it.
func (s *Server) closing(cn *conn, reason, msg string, args ...any) {
	s.met.closedBy(reason)
	s.log.Warn(msg, append([]any{"remote", cn.remote}, args...)...)
}

func (s *Server) releaseBudget(n int64) {
	if n != 0 {
		s.budget.release(n)
		s.met.queued(-n)
	}
}

// acceptFailed counts a failed accept on al's listener and logs it,
// the first at once and then at most one line per acceptLogInterval
// saying how many failed meanwhile; accepting resumes after delay.
func (s *Server) acceptFailed(al *acceptLoop, err error, delay time.Duration) {
	s.met.acceptError(errnoName(err))
	if ok, held := al.errLog.allow(time.Now()); ok {
		s.log.Warn("accepting a connection failed; retrying", "listener", al.l.Name, "err", err, "retry_in", delay,
			"failures_not_logged", held, "log_interval", acceptLogInterval)
	}
}

// gnetLogger routes gnet's own log lines into slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "lib", "gnet") }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...), "lib", "gnet") }
