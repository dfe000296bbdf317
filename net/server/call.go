package server

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model/bufpool"
	"kaas/net/wire"
)

// Call is one decoded request on its way through the broker. The handler
// answers it exactly once, with Reply or (acks=0 produce) NoReply, from any
// goroutine; the connection puts answers back into request order.
type Call struct {
	wire.Header
	Request  kmsg.Request
	Received time.Time
	Remote   string
	// Size is the request's frame size in bytes (what a produce byte-rate
	// quota counts, as Apache's request.sizeInBytes).
	Size int
	// Raw marks a bare SASL token (see Session.SetRawTokens): Request is a
	// SaslAuthenticate whose auth bytes are the frame, and the answer is
	// written as the bare reply token, or nothing if it carries an error.
	Raw bool

	conn  *conn
	seq   uint64
	held  int64         // request budget bytes, given back once settled
	early kmsg.Response // answered without the handler (unsupported version)
	// frameBuf is the frame's pooled buffer (newFrame), or nil.
	frameBuf *bufpool.Buf
	release  func() // ReplyReleasing's: called once the answer is written
	settled  atomic.Bool
	// throttleMs is the longest Throttle asked for, in ms.
	throttleMs atomic.Int32
}

// Reply encodes resp at the request's version and queues it behind every
// earlier answer on the connection. Later calls for the same request are
// ignored, so a handler that panics after replying cannot answer twice.
func (c *Call) Reply(resp kmsg.Response) {
	if !c.settled.CompareAndSwap(false, true) {
		return
	}
	resp.SetVersion(c.Version)
	if ms := c.throttleMs.Load(); ms > 0 {
		if r, ok := resp.(kmsg.SetThrottleResponse); ok {
			if cur, _ := resp.(kmsg.ThrottleResponse).Throttle(); ms > cur {
				r.SetThrottle(ms)
			}
		}
	}
	if a := c.conn.srv.cfg.Answered; a != nil {
		a(c, resp)
	}
	if c.Raw {
		c.conn.complete(c, rawToken(resp))
		return
	}
	// A Fetch answer's record sets are written from the buffers they
	// were read into, not copied into one frame (wire.EncodeResponseSlices).
	c.conn.complete(c, wire.EncodeResponseSlices(c.CorrelationID, resp)...)
}

// ReplyReleasing answers like Reply, then calls release once the
// connection no longer refers to the answer's bytes (written to the
// socket or copied away), so buffers the answer references can be
// reused. It may never be called (a TLS connection, a connection that
// closed with the answer queued): release may only hand buffers back
// to a pool the garbage collector also empties.
func (c *Call) ReplyReleasing(resp kmsg.Response, release func()) {
	if c.settled.Load() {
		return // answered already: the answer written is not resp
	}
	c.release = release
	c.Reply(resp)
}

// ReleaseFrame gives the request's frame back to the buffer pool once
// nothing refers to the request's bytes any more, nor will: the decoded
// request aliases them (a Produce's record batches are the frame's
// bytes), so the handler calls it only when every use of them is over
// (Produce: once every partition has answered). The first call does it;
// a call whose frame is not pooled does nothing.
func (c *Call) ReleaseFrame() {
	b := c.frameBuf
	c.frameBuf = nil
	b.Release()
}

// ReplyAndClose answers like Reply, then closes the connection once the
// answer is written; nothing the client sent after this request is
// served.
func (c *Call) ReplyAndClose(resp kmsg.Response) {
	c.conn.closeAfter(c.seq)
	c.Reply(resp)
}

// Close settles the request with no answer and closes the connection
// (a request that is not allowed at all, as Apache's closeConnection).
func (c *Call) Close() {
	c.conn.closeAfter(c.seq)
	c.NoReply()
}

// NoReply settles a request that gets no answer on the wire (acks=0
// produce), freeing its place in the connection's ordering.
func (c *Call) NoReply() {
	if !c.settled.CompareAndSwap(false, true) {
		return
	}
	if a := c.conn.srv.cfg.Answered; a != nil {
		a(c, nil)
	}
	c.conn.complete(c)
}

// Session is the connection's identity (listener, TLS state, principal).
func (c *Call) Session() *Session { return c.conn.sess }

// Gone is closed when the client's connection closes; a handler that
// waits (a long-poll fetch) can stop early, since nobody will read it.
func (c *Call) Gone() <-chan struct{} { return c.conn.gone }

// Settled reports whether Reply or NoReply has been called.
func (c *Call) Settled() bool { return c.settled.Load() }

// Hold stops the connection from dispatching later requests until release
// is called. Handlers that must finish a blocking step before the next
// request on the same connection may observe its effects (topic creation,
// coordinator writes) hold the connection the way Apache mutes a channel.
// Hold must be called from Serve, before it returns.
func (c *Call) Hold() (release func()) {
	c.conn.hold()
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			c.conn.release()
		}
	}
}

// Throttle is KIP-219's quota throttling: the answer to this call
// carries d as its throttle time (the largest asked for, if called more
// than once) and goes out as soon as it is ready, and the connection
// dispatches nothing more — so stops reading once its next request is
// in — until d has passed. Call it before Reply for the answer to carry
// it; called later it only mutes. Nothing waits: a timer lifts the mute.
func (c *Call) Throttle(d time.Duration) {
	if d <= 0 {
		return
	}
	ms := min(d.Milliseconds(), math.MaxInt32)
	for {
		cur := c.throttleMs.Load()
		if int64(cur) >= ms || c.throttleMs.CompareAndSwap(cur, int32(ms)) {
			break
		}
	}
	c.conn.hold()
	time.AfterFunc(d, c.conn.release)
}

// Throttled is the throttle time asked for so far.
func (c *Call) Throttled() time.Duration {
	return time.Duration(c.throttleMs.Load()) * time.Millisecond
}

// rawToken is a v0 SASL exchange's answer: the reply token with a size
// prefix, or nothing when authentication failed (the connection closes).
func rawToken(resp kmsg.Response) []byte {
	r, ok := resp.(*kmsg.SASLAuthenticateResponse)
	if !ok || r.ErrorCode != 0 {
		return nil
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(r.SASLAuthBytes)), uint32(len(r.SASLAuthBytes)))
	return append(out, r.SASLAuthBytes...)
}
