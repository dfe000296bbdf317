package server

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"kaas/model/bufpool"
)

// transport is what a connection needs from what carries its bytes: gnet
// for plaintext listeners, a writer goroutine over crypto/tls for TLS
// ones. The methods do not block; writev and close are called with
// conn.mu held.
type transport interface {
	// writev queues frames behind everything queued before, in order,
	// and calls done (if not nil) once it no longer refers to their
	// bytes; a transport may leave that to the garbage collector and
	// never call it.
	writev(frames [][]byte, done func())
	// outbound is how many answer bytes wait to be written.
	outbound() int
	// wake has the reader look at the connection again.
	wake()
	// close closes the connection once the queued frames are written.
	close()
}

// conn is the per-connection state. The first group of fields is touched
// only by the connection's reader (its event loop, or a TLS connection's
// reading goroutine); the fields under mu are shared with the goroutines
// that answer calls.
type conn struct {
	gc     gnet.Conn // nil on a TLS connection
	t      transport
	srv    *Server
	remote string
	ip     netip.Addr
	sess   *Session
	gone   chan struct{} // closed when the connection closes

	// Reader only.
	seq      uint64       // next sequence number to hand out
	frame    []byte       // the request being read; nil between requests
	frameBuf *bufpool.Buf // frame's pooled buffer (newFrame), or nil
	need     int          // its size
	held     int64        // budget reserved for frame
	next     *Call        // read and decoded, waiting for its turn
	readsOff bool         // socket reads are paused
	epfd     int          // the loop's epoll descriptor (read pausing); -1 unknown

	retrying   atomic.Bool                   // a timer will wake the loop (outbound backlog)
	orphanWake atomic.Pointer[chan struct{}] // set once orphaned: wakes the orphan's server
	active     atomic.Int64                  // unix nanoseconds of the last byte read or written

	mu        sync.Mutex
	nextWrite uint64            // sequence number of the next frame to write
	ready     map[uint64]answer // answered out of order, waiting for earlier ones
	inflight  int               // dispatched and not yet answered
	exclusive bool              // the requests in flight admit no other
	key       int16             // API key of the pipelined requests in flight
	holds     int               // outstanding Call.Hold
	parked    bool              // the loop waits for an answer or a release
	closed    bool
	goneShut  bool // gone is closed
	// orphaned: the peer closed with requests sent and not yet served;
	// they are served with nothing written back (orphan.go).
	orphaned bool
	closeAt  uint64 // close once the answer with sequence number closeAt-1 is written (0: never)
}

// Limits on what one connection holds besides the request being read.
const (
	// firstChunk is the most a frame's buffer starts with; it grows as its
	// bytes arrive, so a client that announces a large frame and sends
	// little of it holds little memory (the budget still counts the
	// whole frame).
	firstChunk = 1 << 20
	// maxOutbound: a request is dispatched only while at most this many
	// answer bytes wait to be written. Apache reads the next request only
	// once the previous answer is sent; a client that sends requests but
	// never reads its answers stops being read instead of growing the
	// outbound buffer.
	maxOutbound = 1 << 20
	// outboundRecheck is how soon a connection blocked on its outbound
	// backlog looks again (gnet reports no drain).
	outboundRecheck = 10 * time.Millisecond
	// maxUnreadWhilePaused bounds the bytes gnet has read past the point
	// where the connection paused. With reads paused in epoll they stay
	// within a few read chunks; without (pausing unavailable) a client
	// that keeps sending past this is closed rather than buffered.
	maxUnreadWhilePaused = 16 << 20
)

// pump reads and dispatches requests until the connection has to wait: for
// more bytes, for its turn (answers to earlier requests), or for room in
// the request budget. While it waits for anything but bytes, it stops
// reading the socket so TCP pushes back on the client.
func (cn *conn) pump() gnet.Action {
	s := cn.srv
	for {
		if s.draining.Load() {
			return cn.park()
		}
		if cn.next != nil {
			ok, keep := cn.dispatchNext()
			if !keep {
				return gnet.Close
			}
			if !ok {
				return cn.park()
			}
		}
		gc := cn.gc
		if cn.frame == nil {
			if gc.InboundBuffered() < 4 {
				cn.resumeReads()
				return gnet.None
			}
			prefix, _ := gc.Peek(4)
			size := int64(int32(binary.BigEndian.Uint32(prefix)))
			if limit, what := s.maxFrame(cn); size < 0 || size > int64(limit) {
				s.closing(cn, "oversized_frame", "closing connection: request frame over "+what,
					"size", size, "max", limit)
				return gnet.Close
			}
			if !s.budget.reserve(cn, size) {
				return cn.park()
			}
			s.met.queued(size)
			_, _ = gc.Discard(4)
			cn.held, cn.need = size, int(size)
			cn.frame, cn.frameBuf = newFrame(gc, cn.need)
		}
		if n := min(gc.InboundBuffered(), cn.need-len(cn.frame)); n > 0 {
			cn.frame = grow(cn.frame, n, cn.need)
			m, _ := gc.Read(cn.frame[len(cn.frame) : len(cn.frame)+n])
			cn.frame = cn.frame[:len(cn.frame)+m]
		}
		if len(cn.frame) < cn.need {
			cn.resumeReads()
			return gnet.None
		}
		// gnet's buffer is reused after we return and kmsg decoding
		// aliases its input: the frame was copied out as it arrived and is
		// owned by the call from here on.
		call, keep := s.decode(cn, cn.frame, cn.held)
		if call != nil {
			call.frameBuf = cn.frameBuf
		}
		cn.frame, cn.held, cn.frameBuf = nil, 0, nil
		if !keep {
			return gnet.Close
		}
		cn.next = call
	}
}

// pooledFrameMin is the smallest frame read into a pooled buffer (the
// pool's smallest class): below it, allocating costs little.
const pooledFrameMin = 16 << 10

// newFrame is the empty buffer a frame of need bytes (its size prefix
// consumed) is read into. A Produce request's comes from the buffer pool,
// and its handler gives it back once every partition has answered
// (Call.ReleaseFrame): a producer at full rate sends a frame of tens to
// hundreds of KiB per request, and freeing them was about a third of a
// standalone broker's CPU (garbage collection). Other requests, and a
// Produce whose API key has not arrived yet, get a buffer of their own.
func newFrame(gc gnet.Conn, need int) ([]byte, *bufpool.Buf) {
	if need >= pooledFrameMin && need <= firstChunk && gc.InboundBuffered() >= 2 {
		if key, _ := gc.Peek(2); binary.BigEndian.Uint16(key) == produceKey {
			b := bufpool.Get(need)
			return b.Bytes()[:0:need], b
		}
	}
	return make([]byte, 0, min(need, max(firstChunk, gc.InboundBuffered()))), nil
}

// produceKey is Produce's API key.
const produceKey = 0

// grow makes room for n more bytes in frame: the whole frame at once,
// once more than its first chunk arrives. The budget counts the whole
// frame from its size prefix on, so this allocates nothing it did not
// count; growing by doubling instead left as much garbage again as the
// frame (six connections sending 100 MiB frames peaked at 1 GB RSS).
func grow(frame []byte, n, need int) []byte {
	if cap(frame)-len(frame) >= n {
		return frame
	}
	whole := make([]byte, len(frame), need)
	copy(whole, frame)
	return whole
}

// dispatchNext hands cn.next to the handler if its turn has come. ok false
// means it must wait; keep false means the connection must close.
func (cn *conn) dispatchNext() (ok, keep bool) {
	c := cn.next
	if cn.t.outbound() > maxOutbound {
		cn.recheckLater()
		return false, true
	}
	if !cn.claim(c.Key, cn.srv.pipelined(c.Key)) {
		return false, true
	}
	cn.next = nil
	return true, cn.srv.dispatch(cn, c)
}

// claim takes a place for a request with API key key in the connection's
// order. A request sees the effect of every earlier request on its
// connection (Apache reads the next request only after answering the
// previous one): it is dispatched when nothing is in flight, or — for a
// pipelined API such as Produce, whose order the partitions' mailboxes
// keep — when only requests of the same API are. Otherwise the loop parks
// until an answer or a Hold release wakes it.
func (cn *conn) claim(key int16, pipelined bool) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	ok := !cn.closed && cn.closeAt == 0 && cn.holds == 0 && cn.inflight < cn.srv.cfg.MaxInflightPerConn &&
		(cn.inflight == 0 || (pipelined && !cn.exclusive && cn.key == key))
	if !ok {
		cn.parked = true
		return false
	}
	if cn.inflight == 0 {
		cn.exclusive, cn.key = !pipelined, key
	}
	cn.inflight++
	cn.srv.inflight.Add(1)
	return true
}

// park stops reading the socket while the connection waits; a client that
// goes on sending fills the kernel's buffers and TCP pushes back.
func (cn *conn) park() gnet.Action {
	n := cn.gc.InboundBuffered()
	if int64(n) > cn.srv.unreadMax.Load() {
		cn.srv.unreadMax.Store(int64(n)) // loops race here only for a test statistic
	}
	if n > maxUnreadWhilePaused {
		cn.srv.closing(cn, "unread_overrun", "closing connection: it kept sending while its requests waited",
			"unread_bytes", n, "max", maxUnreadWhilePaused)
		return gnet.Close
	}
	cn.pauseReads()
	return gnet.None
}

// recheckLater wakes the loop after outboundRecheck, once.
func (cn *conn) recheckLater() {
	if cn.retrying.CompareAndSwap(false, true) {
		time.AfterFunc(outboundRecheck, func() {
			cn.retrying.Store(false)
			cn.wake()
		})
	}
}

// wake has the reader look again: the event loop runs pump (gnet calls
// OnTraffic only on new bytes), a TLS reader stops waiting. A closed
// connection ignores it.
func (cn *conn) wake() {
	if ch := cn.orphanWake.Load(); ch != nil {
		select {
		case *ch <- struct{}{}:
		default:
		}
		return
	}
	cn.t.wake()
}

// shutGoneLocked closes gone once (under mu): nobody reads answers any
// more.
func (cn *conn) shutGoneLocked() {
	if !cn.goneShut {
		cn.goneShut = true
		close(cn.gone)
	}
}

func (cn *conn) hold() {
	cn.mu.Lock()
	cn.holds++
	cn.mu.Unlock()
}

func (cn *conn) release() {
	cn.mu.Lock()
	cn.holds--
	wake := cn.unparkLocked()
	cn.mu.Unlock()
	if wake {
		cn.wake()
	}
}

// unparkLocked reports whether the loop parked and should look again.
func (cn *conn) unparkLocked() bool {
	if cn.parked && !cn.closed {
		cn.parked = false
		return true
	}
	return false
}

// complete records the answer for call c — the slices of its frame, in
// order; none: nothing on the wire — and writes every answer that is now
// in order. Frames are queued under mu: the
// transport writes them in the order they were queued (gnet runs queued
// writes in order), so queueing under the lock is what keeps frames in
// request order across answering goroutines.
func (cn *conn) complete(c *Call, frame ...[]byte) {
	cn.mu.Lock()
	if cn.ready == nil {
		cn.ready = make(map[uint64]answer)
	}
	cn.ready[c.seq] = answer{frame: frame, release: c.release}
	var batch [][]byte
	var releases []func()
	closing, settled := false, false
	for {
		a, ok := cn.ready[cn.nextWrite]
		if !ok {
			break
		}
		delete(cn.ready, cn.nextWrite)
		cn.nextWrite++
		settled = true
		closing = closing || (cn.closeAt != 0 && cn.nextWrite == cn.closeAt)
		cn.inflight--
		cn.srv.inflight.Add(-1)
		for _, x := range a.frame {
			if x != nil {
				batch = append(batch, x)
			}
		}
		if a.release != nil {
			releases = append(releases, a.release)
		}
	}
	done := releaseAll(releases)
	switch {
	case len(batch) > 0 && !cn.closed && !cn.orphaned:
		cn.t.writev(batch, done)
	case done != nil:
		done() // nothing will be written
	}
	if closing && !cn.closed && !cn.orphaned {
		cn.t.close()
	}
	// A place in flight was given back, whether or not anything goes on
	// the wire: a request with no answer (acks=0 produce) frees its slot
	// too, or a connection of acks=0 requests parks at the in-flight
	// limit and is never read again.
	wake := settled && cn.unparkLocked()
	cn.mu.Unlock()
	cn.srv.releaseBudget(c.held)
	if wake {
		cn.wake()
	}
}

// answer is one call's frame waiting for its turn, and what to call once
// it has been written (Call.ReplyReleasing).
type answer struct {
	frame   [][]byte
	release func()
}

// releaseAll is one function calling each of fs; nil for none.
func releaseAll(fs []func()) func() {
	switch len(fs) {
	case 0:
		return nil
	case 1:
		return fs[0]
	}
	return func() {
		for _, f := range fs {
			f()
		}
	}
}

// closeAfter makes the answer to the call with sequence number seq the
// last one: nothing after it is dispatched, and the connection closes once
// it is written.
func (cn *conn) closeAfter(seq uint64) {
	cn.mu.Lock()
	if cn.closeAt == 0 {
		cn.closeAt = seq + 1
	}
	cn.mu.Unlock()
}

// markClosed runs on the loop when the connection closes: it gives back
// the budget of requests read but never dispatched.
func (cn *conn) markClosed() {
	cn.mu.Lock()
	if !cn.closed {
		cn.closed = true
		cn.shutGoneLocked()
	}
	cn.mu.Unlock()
	cn.srv.budget.forget(cn)
	held := cn.held
	if cn.next != nil {
		held += cn.next.held
		cn.next = nil
	}
	cn.frame, cn.held = nil, 0
	cn.srv.releaseBudget(held)
	if cn.readsOff {
		cn.readsOff = false
		cn.srv.met.paused(-1)
	}
}

// gnetTransport writes answers straight to the socket from the goroutine
// that completes them when nothing is queued in gnet for the connection,
// and through gnet's asynchronous, loop-ordered queue otherwise.
//
// Why: AsyncWritev wakes the event loop (an eventfd write, the loop's
// thread back from epoll_wait and onto a P) for every answer, one more
// hop between a produce landing and a waiting fetch's answer leaving. A
// non-blocking writev from the answering goroutine puts the bytes in the
// socket at once, and a large Fetch answer's record sets go from the
// buffers they were read into straight to the socket, where before
// whatever the socket did not take at once was copied into gnet's
// outbound buffer.
//
// Order: writev is called with the conn's mu held (complete queues
// answers in order under it), and a direct write happens only while no
// AsyncWritev of this connection is pending and gnet's outbound buffer
// was empty when the last one finished, so no earlier byte can still be
// on its way through gnet. Whatever the socket does not take goes to
// AsyncWritev, behind which later answers queue as before.
// Descriptor reuse: gnet calls OnClose (markClosed, which takes mu and
// sets closed) before it closes the descriptor, and complete writes only
// while !closed under mu, so a direct write never reaches a descriptor
// gnet has closed and the kernel may have handed to another connection.
type gnetTransport struct {
	gc  gnet.Conn
	srv *Server
	cn  *conn
	fd  int // the socket; -1: never write directly

	// Under cn.mu.
	queued  int  // AsyncWritev calls whose callback has not run yet
	drained bool // gnet's outbound buffer was empty after the last one
	closing bool // a close is queued: nothing may overtake it
}

func newGnetTransport(gc gnet.Conn, s *Server, cn *conn) *gnetTransport {
	fd := gc.Fd()
	if !canWriteDirect(fd) {
		fd = -1
	}
	return &gnetTransport{gc: gc, srv: s, cn: cn, fd: fd, drained: true}
}

// iovMax is writev's limit on slices (IOV_MAX on Linux and the BSDs).
// gnet hands a queued write's slices to writev as they are, so frames
// are queued at most iovMax slices at a time.
const iovMax = 1024

func (t *gnetTransport) writev(frames [][]byte, done func()) {
	direct := false // some bytes went straight to the socket
	if t.fd >= 0 && t.queued == 0 && t.drained && !t.closing {
		for len(frames) > 0 {
			chunk := frames[:min(len(frames), iovMax)]
			want := 0
			for _, f := range chunk {
				want += len(f)
			}
			n := writevDirect(t.fd, chunk)
			if n > 0 {
				t.cn.touch()
				direct = true
			}
			frames = skipWritten(frames, n)
			if n < want {
				break // the socket is full
			}
		}
	}
	t.srv.met.answerWrite(direct, len(frames) > 0)
	if len(frames) == 0 && done != nil {
		done()
	}
	for len(frames) > 0 {
		chunk := frames[:min(len(frames), iovMax)]
		frames = frames[len(chunk):]
		cb := t.wrote
		if len(frames) == 0 && done != nil {
			// gnet has written or copied the slices by the time it
			// calls back (its outbound buffer holds copies).
			cb = func(gc gnet.Conn, err error) error {
				defer done()
				return t.wrote(gc, err)
			}
		}
		t.queued++
		t.drained = false
		t.srv.pendingWrites.Add(1)
		if err := t.gc.AsyncWritev(chunk, cb); err != nil {
			t.queued--
			t.srv.pendingWrites.Add(-1)
			if len(frames) == 0 && done != nil {
				done() // never queued
			}
		}
	}
}

// noteDrained runs on the event loop before it reads a connection's
// requests: gnet says nothing when it finishes writing its outbound
// buffer, so drained, set only when a queued write's callback found the
// buffer empty, stayed false after every answer the socket could not take
// whole. A consumer's fetch answers are such answers (megabytes each), so
// once one overflowed every later one went through the loop — none was
// written directly. On the loop nothing of the connection is in flight
// in gnet when no queued write is pending and the buffer is empty; a
// client that reads its answer before sending the next request (a
// consumer) finds the next answer written straight from the goroutine
// that made it.
func (t *gnetTransport) noteDrained() {
	t.cn.mu.Lock()
	if !t.drained && t.queued == 0 && t.gc.OutboundBuffered() == 0 {
		t.drained = true
	}
	t.cn.mu.Unlock()
}

// wrote runs on the event loop after each queued write.
func (t *gnetTransport) wrote(gc gnet.Conn, err error) error {
	t.cn.mu.Lock()
	t.queued--
	t.drained = err == nil && gc != nil && gc.OutboundBuffered() == 0
	t.cn.mu.Unlock()
	return t.srv.wrote(gc, err)
}

// skipWritten drops the first n bytes of frames.
func skipWritten(frames [][]byte, n int) [][]byte {
	for len(frames) > 0 && n >= len(frames[0]) {
		n -= len(frames[0])
		frames = frames[1:]
	}
	if len(frames) > 0 && n > 0 {
		frames[0] = frames[0][n:]
	}
	return frames
}

func (t *gnetTransport) outbound() int { return t.gc.OutboundBuffered() }

func (t *gnetTransport) wake() { _ = t.gc.Wake(nil) }

// close is queued after the writes already queued, which gnet runs first
// (and a close flushes what is buffered).
func (t *gnetTransport) close() {
	t.closing = true
	_ = t.gc.Close()
}
