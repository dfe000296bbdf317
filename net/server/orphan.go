package server

import (
	"encoding/binary"
	"errors"
	"io"

	"golang.org/x/sys/unix"
)

// Requests a client sent before it closed its end are served, as Apache
// serves them: its selector reads a muted channel's remaining requests
// once unmuted, and a channel closed with requests staged is closed
// gracefully, after they are processed. A fire-and-forget producer
// (acks=0: kcat, log shippers, kafka-go's Writer) writes its last requests
// and closes at once; with kaas's in-flight bound those requests are
// still unread (in gnet's buffer, or in the kernel's behind a paused
// read) when the FIN arrives, and were dropped with the connection.
//
// On a close by the peer (EOF) the connection becomes an orphan: what it
// sent and kaas has not served is copied out of gnet's and the kernel's
// buffers (bounded by maxUnreadWhilePaused) and served in order by a
// goroutine of its own, through the same claim, budget, decode and
// dispatch steps as the event loop's pump; nothing is written back
// (nobody reads it), and Call.Gone is closed at once so a long-poll fetch
// among them ends early. A frame the client did not finish is dropped.
// A close kaas made (a bad frame, idleness, shutdown) or a reset is not
// orphaned: nothing after it is served. TLS connections are not orphaned
// yet (their reader shuts a connection whose peer closed).

// orphan makes cn an orphan if the peer closed it (err: why gnet closed
// it) with requests unserved, and returns the bytes not yet read into a
// frame. It runs in OnClose, on the event loop, while gnet's buffer and
// the descriptor are still valid.
func (cn *conn) orphan(err error) ([]byte, bool) {
	s := cn.srv
	if !errors.Is(err, io.EOF) || s.draining.Load() || cn.gc == nil {
		return nil, false
	}
	cn.mu.Lock()
	stopped := cn.closed || cn.closeAt != 0
	cn.mu.Unlock()
	if stopped {
		return nil, false
	}
	var rest []byte
	if n := cn.gc.InboundBuffered(); n > 0 {
		buf, _ := cn.gc.Peek(n)
		rest = append(rest, buf...)
	}
	// A paused connection's FIN is reported (EPOLLRDHUP) with its last
	// requests still in the kernel: gnet closed it without reading them.
	var chunk [64 << 10]byte
	for len(rest) < maxUnreadWhilePaused {
		n, err := unix.Read(cn.gc.Fd(), chunk[:min(len(chunk), maxUnreadWhilePaused-len(rest))])
		if n <= 0 || err != nil {
			break
		}
		rest = append(rest, chunk[:n]...)
	}
	if cn.next == nil && (cn.frame == nil || len(cn.frame)+len(rest) < cn.need) && len(rest) < 4 {
		return nil, false // nothing whole left to serve
	}
	ch := make(chan struct{}, 1)
	cn.orphanWake.Store(&ch)
	cn.mu.Lock()
	cn.orphaned = true
	cn.shutGoneLocked()
	cn.mu.Unlock()
	if cn.readsOff {
		cn.readsOff = false
		s.met.paused(-1)
	}
	return rest, true
}

// serveOrphan serves an orphan's requests in order, then closes it.
func (cn *conn) serveOrphan(rest []byte) {
	s := cn.srv
	defer s.orphans.Done()
	defer cn.markClosed()
	served := 0
	for !s.draining.Load() {
		if c := cn.next; c != nil {
			if !cn.claim(c.Key, s.pipelined(c.Key)) {
				if cn.stoppedOrphan() || !cn.waitOrphan() {
					break
				}
				continue
			}
			cn.next = nil
			served++
			if !s.dispatch(cn, c) {
				break
			}
			continue
		}
		if cn.frame == nil {
			if len(rest) < 4 {
				break
			}
			size := int64(int32(binary.BigEndian.Uint32(rest)))
			if limit, what := s.maxFrame(cn); size < 0 || size > int64(limit) {
				s.closing(cn, "oversized_frame", "dropping a closed connection's last requests: request frame over "+what,
					"size", size, "max", limit)
				break
			}
			if !s.budget.reserve(cn, size) {
				if !cn.waitOrphan() {
					break
				}
				continue
			}
			s.met.queued(size)
			rest = rest[4:]
			cn.held, cn.need = size, int(size)
			cn.frame = make([]byte, 0, size)
		}
		n := min(len(rest), cn.need-len(cn.frame))
		cn.frame, rest = append(cn.frame, rest[:n]...), rest[n:]
		if len(cn.frame) < cn.need {
			break // the client closed in the middle of it
		}
		call, keep := s.decode(cn, cn.frame, cn.held)
		cn.frame, cn.held = nil, 0
		if !keep {
			break
		}
		cn.next = call
	}
	s.met.afterPeerClose(served)
	s.log.Debug("served a closed connection's last requests", "remote", cn.remote, "requests", served)
}

// stoppedOrphan reports whether nothing more may be dispatched (a
// request asked for the connection to close after it).
func (cn *conn) stoppedOrphan() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.closeAt != 0
}

// waitOrphan waits for the orphan to be woken (an answer settled, a hold
// released, budget returned); false once the server shuts down.
func (cn *conn) waitOrphan() bool {
	select {
	case <-*cn.orphanWake.Load():
		return true
	case <-cn.srv.drainCh:
		return false
	}
}
