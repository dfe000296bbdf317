package server

// KIP-219 throttling: the answer carries the throttle time and leaves at
// once; the connection's next request is dispatched only once the
// throttle time has passed.

import (
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttlingHandler throttles its first call by d and answers it at once.
type throttlingHandler struct {
	*fakeHandler
	d     time.Duration
	first bool
	at    chan time.Time // just before the first answer was throttled
}

func (h *throttlingHandler) Serve(c *Call) {
	if !h.first {
		h.first = true
		h.at <- time.Now() // before the mute's timer starts
		c.Throttle(h.d / 2)
		c.Throttle(h.d) // the longest one wins
		c.Reply(c.Request.ResponseKind())
		return
	}
	h.fakeHandler.Serve(c)
}

func TestThrottleCarriesTimeAndMutes(t *testing.T) {
	const d = 300 * time.Millisecond
	h := &throttlingHandler{fakeHandler: newFakeHandler(false), d: d, at: make(chan time.Time, 1)}
	s := startServer(t, h, nil)
	c := dial(t, s)
	c.send(metadata())
	second := c.send(metadata())
	answered := <-h.at
	// The first answer arrives without waiting out the throttle, and
	// says how long it is.
	_ = c.nc.SetReadDeadline(time.Now().Add(patience))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, buf); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	if err := resp.ReadFrom(buf[5:]); err != nil { // correlation id, header tags
		t.Fatal(err)
	}
	if resp.ThrottleMillis != int32(d.Milliseconds()) {
		t.Fatalf("throttle millis %d, want %d", resp.ThrottleMillis, d.Milliseconds())
	}
	next := h.next(t, patience)
	if waited := time.Since(answered); waited < d {
		t.Fatalf("next request dispatched %v after a %v throttle began", waited, d)
	}
	if next.CorrelationID != second {
		t.Fatalf("dispatched %d, want %d", next.CorrelationID, second)
	}
	next.Reply(next.Request.ResponseKind())
	if corr, err := c.readCorr(patience); err != nil || corr != second {
		t.Fatalf("second answer %d, %v", corr, err)
	}
}
