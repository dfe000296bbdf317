package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
)

// TLS connections. gnet has no TLS, so a TLS listener's connections do
// not go to the event loops: each gets a reader goroutine that handshakes
// and then does what pump does on an event loop — read one frame (within
// the frame limit and the request budget), decode it, wait for its turn,
// dispatch it — and a writer goroutine that writes the answers the
// connection queues, in queue order. Calls, sequence numbers, the
// in-order replies, holds, the budget and the outbound bound are the
// conn's, exactly as for a plaintext connection; while the connection may
// not read on (its turn, the budget, its unwritten answers), the reader
// does not read the socket and TCP pushes back on the client. A slow
// handshake or a slow TLS client costs only its own goroutines: the event
// loops never see it.

var _ transport = (*tlsTransport)(nil)

// serveTLS runs an accepted TLS listener connection on its own goroutines.
func (s *Server) serveTLS(al *acceptLoop, nc net.Conn, ip netip.Addr) {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	tt := &tlsTransport{srv: s, nc: tls.Server(nc, al.l.TLS), wakeCh: make(chan struct{}, 1), queued: make(chan struct{}, 1), done: make(chan struct{})}
	s.tlsMu.Lock()
	if s.tlsOpen == nil {
		s.tlsOpen = map[*tlsTransport]bool{}
	}
	s.tlsOpen[tt] = true
	s.tlsMu.Unlock()
	s.tlsConns.Add(1)
	go func() {
		defer s.tlsConns.Done()
		s.readTLS(al.l, tt, ip)
		s.tlsMu.Lock()
		delete(s.tlsOpen, tt)
		s.tlsMu.Unlock()
	}()
}

// stopTLS closes every TLS connection and waits for their goroutines.
func (s *Server) stopTLS() {
	s.tlsMu.Lock()
	for tt := range s.tlsOpen {
		tt.shut()
	}
	s.tlsMu.Unlock()
	s.tlsConns.Wait()
}

// readTLS is a TLS connection's reader: the handshake, then frames.
func (s *Server) readTLS(l Listener, tt *tlsTransport, ip netip.Addr) {
	defer tt.shut()
	remote := tt.nc.RemoteAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.TLSHandshakeTimeout)
	err := tt.nc.HandshakeContext(ctx)
	cancel()
	if s.cfg.TLSHandshake != nil {
		s.cfg.TLSHandshake(l.Name, err)
	}
	if err != nil {
		s.met.closedBy("tls_handshake")
		s.log.Info("closing connection: TLS handshake failed", "remote", remote, "listener", l.Name, "err", err)
		s.acc.closed(ip)
		return
	}
	state := tt.nc.ConnectionState()
	cn := &conn{t: tt, srv: s, remote: remote, ip: ip, gone: make(chan struct{}), sess: s.newSession(l, remote, &state)}
	tt.cn = cn // before the writer starts
	s.opened(cn)
	defer s.closed(cn)
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		tt.write()
	}()
	defer writer.Wait()
	defer tt.shut()

	r := bufio.NewReaderSize(activeReader{tt.nc, cn}, 16<<10)
	var prefix [4]byte
	for {
		if _, err := io.ReadFull(r, prefix[:]); err != nil {
			return
		}
		size := int64(int32(binary.BigEndian.Uint32(prefix[:])))
		if limit, what := s.maxFrame(cn); size < 0 || size > int64(limit) {
			s.closing(cn, "oversized_frame", "closing connection: request frame over "+what, "size", size, "max", limit)
			return
		}
		for !s.budget.reserve(cn, size) {
			if !tt.waitWatchingPeer() {
				return
			}
		}
		s.met.queued(size)
		cn.held, cn.need = size, int(size)
		frame := make([]byte, size)
		if _, err := io.ReadFull(r, frame); err != nil {
			return // markClosed gives the budget back
		}
		call, keep := s.decode(cn, frame, cn.held)
		cn.held = 0
		if !keep {
			return
		}
		cn.next = call
		for {
			if s.draining.Load() {
				<-tt.done // nothing more is dispatched; Shutdown closes us
				return
			}
			ok, keep := cn.dispatchNext()
			if !keep {
				return
			}
			if ok {
				break
			}
			if !tt.waitWatchingPeer() {
				return
			}
		}
	}
}

// tlsTransport is a TLS connection's write side: frames queued under
// conn.mu, written by one goroutine in queue order.
type tlsTransport struct {
	srv    *Server
	nc     *tls.Conn
	cn     *conn         // set before the writer starts
	wakeCh chan struct{} // the reader may try again
	queued chan struct{} // frames (or a close) wait for the writer
	done   chan struct{} // closed by shut

	mu       sync.Mutex
	frames   [][]byte
	bytes    int  // in frames
	closing  bool // close once frames are written
	dead     bool // the writer is gone: drop frames
	shutOnce sync.Once
}

// writev never calls done: the buffers an answer references go to the
// garbage collector (TLS copies every byte into its records anyway).
func (tt *tlsTransport) writev(frames [][]byte, _ func()) {
	tt.mu.Lock()
	if !tt.dead {
		tt.frames = append(tt.frames, frames...)
		for _, f := range frames {
			tt.bytes += len(f)
		}
		tt.srv.pendingWrites.Add(int64(len(frames)))
	}
	tt.mu.Unlock()
	tt.signal()
}

func (tt *tlsTransport) outbound() int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.bytes
}

func (tt *tlsTransport) wake() {
	select {
	case tt.wakeCh <- struct{}{}:
	default:
	}
}

func (tt *tlsTransport) close() {
	tt.mu.Lock()
	tt.closing = true
	tt.mu.Unlock()
	tt.signal()
}

func (tt *tlsTransport) signal() {
	select {
	case tt.queued <- struct{}{}:
	default:
	}
}

// wait blocks until woken (true) or the connection shuts (false).
func (tt *tlsTransport) wait() bool {
	select {
	case <-tt.wakeCh:
		return true
	case <-tt.done:
		return false
	}
}

// shut closes the connection at once: the reader ended, a write failed,
// or the server stops.
func (tt *tlsTransport) shut() {
	tt.shutOnce.Do(func() {
		close(tt.done)
		_ = tt.nc.Close()
	})
}

// write drains queued frames, coalescing small answers into full TLS
// records (16 KiB, the most a record holds), until the connection shuts
// or a requested close has flushed everything.
func (tt *tlsTransport) write() {
	s := tt.srv
	defer func() {
		tt.mu.Lock()
		tt.dead = true
		s.pendingWrites.Add(-int64(len(tt.frames)))
		tt.frames, tt.bytes = nil, 0
		tt.mu.Unlock()
	}()
	w := bufio.NewWriterSize(tt.nc, 16<<10)
	for {
		select {
		case <-tt.queued:
		case <-tt.done:
			return
		}
		tt.mu.Lock()
		frames, closing := tt.frames, tt.closing
		tt.frames = nil
		tt.mu.Unlock()
		var err error
		n := 0
		for _, f := range frames {
			if _, err = w.Write(f); err != nil {
				break
			}
			n += len(f)
		}
		if err == nil {
			err = w.Flush()
		}
		tt.mu.Lock()
		tt.bytes -= n
		tt.mu.Unlock()
		if err == nil {
			tt.cn.touch()
		}
		s.pendingWrites.Add(-int64(len(frames)))
		// Answers left the connection: a reader waiting on its outbound
		// bound may go on.
		tt.wake()
		if err != nil || closing {
			tt.shut()
			return
		}
	}
}

// activeReader records activity on cn for every read that returns bytes.
type activeReader struct {
	r  io.Reader
	cn *conn
}

func (a activeReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.cn.touch()
	}
	return n, err
}
