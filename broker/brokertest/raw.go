package brokertest

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is a bare Kafka connection for tests that need control over the
// bytes and the order of requests on one connection (pipelining, bad
// frames), which a franz-go client does not give.
type Conn struct {
	t    testing.TB
	nc   net.Conn
	r    *bufio.Reader
	corr int32
	// sent maps correlation ids to the request, so Read can decode the
	// answer at the right version.
	sent map[int32]kmsg.Request
}

// Dial opens a bare connection, closed when the test ends.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &Conn{t: t, nc: nc, r: bufio.NewReader(nc), sent: map[int32]kmsg.Request{}}
}

// DialTLS opens a bare TLS connection and completes the handshake.
func DialTLS(t testing.TB, addr string, cfg *tls.Config) *Conn {
	t.Helper()
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial TLS %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &Conn{t: t, nc: nc, r: bufio.NewReader(nc), sent: map[int32]kmsg.Request{}}
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Send writes req framed as a client would and returns its correlation id.
func (c *Conn) Send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("brokertest")).AppendRequest(nil, req, c.corr)
	c.WriteRaw(frame)
	c.sent[c.corr] = req
	return c.corr
}

// WriteRaw writes bytes as they are (no framing added).
func (c *Conn) WriteRaw(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// WriteTimeout writes b with a deadline and returns what was written: a
// test asserting that the broker stops reading a connection expects a
// timeout.
func (c *Conn) WriteTimeout(b []byte, d time.Duration) (int, error) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(d))
	return c.nc.Write(b)
}

// Read reads the next response frame and decodes it as the answer to the
// request with its correlation id; d bounds the wait.
func (c *Conn) Read(d time.Duration) (int32, kmsg.Response, error) {
	corr, body, err := c.ReadFrame(d)
	if err != nil {
		return 0, nil, err
	}
	req, ok := c.sent[corr]
	if !ok {
		return corr, nil, fmt.Errorf("answer with unknown correlation id %d", corr)
	}
	delete(c.sent, corr)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != 18 {
		// Response header v1: one byte of (empty) tagged fields.
		if len(body) == 0 {
			return corr, nil, errors.New("flexible response without its header tags")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return corr, nil, fmt.Errorf("decoding %s v%d answer: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return corr, resp, nil
}

// ReadFrame reads one response frame: its correlation id and the rest.
func (c *Conn) ReadFrame(d time.Duration) (int32, []byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 256<<20 {
		return 0, nil, fmt.Errorf("bad response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// RoundTrip sends req and reads its answer.
func (c *Conn) RoundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	want := c.Send(req)
	corr, resp, err := c.Read(10 * time.Second)
	if err != nil {
		c.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	if corr != want {
		c.t.Fatalf("%s: answer for correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, want)
	}
	return resp
}

// Closed reports whether the peer closed the connection within d (a read
// returns EOF or a reset), as the broker does after a bad frame.
func (c *Conn) Closed(d time.Duration) bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	for {
		_, err := c.r.Read(b[:])
		if err == nil {
			continue // drain answers sent before the close
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		return true
	}
}
