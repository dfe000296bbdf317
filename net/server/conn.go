package server

import (
	"sync"

	"github.com/panjf2000/gnet/v2"
)

// conn is the per-connection state. seq is touched only by the event loop;
// everything under mu is shared with the goroutines that answer calls.
type conn struct {
	gc     gnet.Conn
	srv    *Server
	remote string
	seq    uint64 // next sequence number to hand out (event loop only)

	mu        sync.Mutex
	nextWrite uint64            // sequence number of the next frame to write
	ready     map[uint64][]byte // answered out of order, waiting for earlier ones
	inflight  int               // dispatched and not yet answered
	holds     int               // outstanding Call.Hold
	paused    bool              // the loop stopped parsing because of inflight/holds
	closed    bool
	gone      chan struct{} // closed when the connection closes
}

func (cn *conn) canDispatch() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	ok := !cn.closed && cn.holds == 0 && cn.inflight < cn.srv.cfg.MaxInflightPerConn
	cn.paused = !ok
	return ok
}

func (cn *conn) dispatched() {
	cn.mu.Lock()
	cn.inflight++
	cn.mu.Unlock()
	cn.srv.inflight.Add(1)
}

func (cn *conn) hold() {
	cn.mu.Lock()
	cn.holds++
	cn.mu.Unlock()
}

func (cn *conn) release() {
	cn.mu.Lock()
	cn.holds--
	wake := cn.resumeLocked()
	cn.mu.Unlock()
	if wake {
		_ = cn.gc.Wake(nil)
	}
}

// resumeLocked reports whether the loop paused and may now go on parsing;
// the caller then wakes it, since gnet only calls OnTraffic on new bytes.
func (cn *conn) resumeLocked() bool {
	if cn.paused && !cn.closed && cn.holds == 0 && cn.inflight < cn.srv.cfg.MaxInflightPerConn {
		cn.paused = false
		return true
	}
	return false
}

// complete records the answer (nil: none on the wire) for call c and writes
// every answer that is now in order. AsyncWritev is called under mu: gnet
// runs queued writes in the order they were queued, so queueing under the
// lock is what keeps frames in request order across answering goroutines.
func (cn *conn) complete(c *Call, frame []byte) {
	cn.mu.Lock()
	if cn.ready == nil {
		cn.ready = make(map[uint64][]byte)
	}
	cn.ready[c.seq] = frame
	var batch [][]byte
	for {
		f, ok := cn.ready[cn.nextWrite]
		if !ok {
			break
		}
		delete(cn.ready, cn.nextWrite)
		cn.nextWrite++
		cn.inflight--
		cn.srv.inflight.Add(-1)
		if f != nil {
			batch = append(batch, f)
		}
	}
	if len(batch) > 0 && !cn.closed {
		cn.srv.pendingWrites.Add(1)
		if err := cn.gc.AsyncWritev(batch, cn.srv.wrote); err != nil {
			cn.srv.pendingWrites.Add(-1)
		}
	}
	wake := cn.resumeLocked()
	cn.mu.Unlock()
	if wake {
		_ = cn.gc.Wake(nil)
	}
}

func (cn *conn) markClosed() {
	cn.mu.Lock()
	if !cn.closed {
		cn.closed = true
		close(cn.gone)
	}
	cn.mu.Unlock()
}
