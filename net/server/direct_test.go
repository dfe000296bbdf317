package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bigProduceAnswer is an answer of about n*20 bytes (partitions of one
// topic), so a few of them overflow the socket's buffers.
func bigProduceAnswer(c *Call, n int) kmsg.Response {
	resp := c.Request.ResponseKind().(*kmsg.ProduceResponse)
	t := kmsg.NewProduceResponseTopic()
	t.Topic = "big"
	for i := range n {
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = int32(i)
		t.Partitions = append(t.Partitions, p)
	}
	resp.Topics = append(resp.Topics, t)
	return resp
}

// Answers written straight to the socket and answers queued through the
// event loop (the socket full because the client does not read) reach
// the client whole and in request order, each answered from its own
// goroutine; once the client has read everything, answers are written
// directly again.
func TestDirectAndQueuedWritesKeepOrder(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, func(c *Config) { c.MaxInflightPerConn = 64 })
	c := dial(t, s)
	direct, split, loop := s.cfg.Metrics.AnswerWritesDirect, s.cfg.Metrics.AnswerWritesSplit, s.cfg.Metrics.AnswerWritesLoop
	const n = 16
	for range n {
		c.send(produce())
	}
	sizes := map[int32]int{}
	for i := range n {
		call := h.next(t, patience)
		parts := 10 // small
		if i%3 == 0 {
			parts = 100_000 // about 2 MB
		}
		resp := bigProduceAnswer(call, parts)
		resp.SetVersion(call.Version)
		sizes[call.CorrelationID] = len(resp.AppendTo(nil)) + 4 + 1 // correlation id, header tags
		done := make(chan struct{})
		go func() { call.Reply(resp); close(done) }()
		<-done
	}
	if testutil.ToFloat64(loop)+testutil.ToFloat64(split) == 0 {
		t.Fatalf("no answer went through the event loop with the client not reading (direct %v)", testutil.ToFloat64(direct))
	}
	for i := range n {
		corr, size, err := c.readFrame(patience)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if want := int32(i + 1); corr != want {
			t.Fatalf("answer %d has correlation id %d, want %d", i, corr, want)
		}
		if size != sizes[corr] {
			t.Fatalf("answer %d is %d bytes, want %d", i, size, sizes[corr])
		}
	}
	before := testutil.ToFloat64(direct)
	for i := range 3 {
		c.send(metadata())
		call := h.next(t, patience)
		call.Reply(call.Request.ResponseKind())
		if _, _, err := c.readFrame(patience); err != nil {
			t.Fatalf("metadata %d: %v", i, err)
		}
	}
	if testutil.ToFloat64(direct) <= before {
		t.Fatalf("no answer written directly once the client caught up")
	}
}

// readFrame reads one answer and returns its correlation id and size.
func (c *rawConn) readFrame(d time.Duration) (int32, int, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		return 0, 0, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return 0, 0, fmt.Errorf("frame of %d bytes: %w", len(buf), err)
	}
	return int32(binary.BigEndian.Uint32(buf)), len(buf), nil
}

// A Fetch answer referencing more record sets than writev takes at once
// (IOV_MAX slices), answered while the client is not reading, reaches it
// whole: the part the socket takes at once written directly, the rest
// queued through the event loop in pieces gnet can write. ReplyReleasing
// calls release only once nothing refers to the record sets: release
// scribbles over them (as a pooled buffer's next reader would), and the
// client still reads them as answered.
func TestFetchAnswerOfMoreSlicesThanWritevTakes(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	c.send(req)
	call := h.next(t, patience)
	resp := call.Request.ResponseKind().(*kmsg.FetchResponse)
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "many"
	const parts = 1100 // with the bytes between them, over 2,000 slices
	var want [][]byte
	for i := range parts {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(i)
		p.RecordBatches = bytes.Repeat([]byte{byte(i)}, 16<<10+i)
		want = append(want, bytes.Clone(p.RecordBatches))
		rt.Partitions = append(rt.Partitions, p)
	}
	resp.Topics = append(resp.Topics, rt)
	var released atomic.Bool
	call.ReplyReleasing(resp, func() {
		for _, p := range rt.Partitions {
			clear(p.RecordBatches)
		}
		released.Store(true)
	})
	if testutil.ToFloat64(s.cfg.Metrics.AnswerWritesDirect) != 0 {
		t.Fatalf("an answer of %d partitions fit the socket whole; the test needs it not to", parts)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(patience))
	var size [4]byte
	if _, err := io.ReadFull(c.r, size[:]); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.r, frame); err != nil {
		t.Fatalf("frame of %d bytes: %v", len(frame), err)
	}
	got := kmsg.NewPtrFetchResponse()
	got.SetVersion(12)
	if err := got.ReadFrom(frame[5:]); err != nil { // correlation id, header tags
		t.Fatal(err)
	}
	if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != parts {
		t.Fatalf("answer has %d topics", len(got.Topics))
	}
	for i, p := range got.Topics[0].Partitions {
		if p.Partition != int32(i) || !bytes.Equal(p.RecordBatches, want[i]) {
			t.Fatalf("partition %d: %d bytes, not the record set answered", p.Partition, len(p.RecordBatches))
		}
	}
	eventually(t, patience, "release after the answer was written", released.Load)
}

// A consumer's pattern: each answer is larger than the socket takes at
// once, and the client reads it whole before sending its next request.
// The part of the first answer the socket did not take went through the
// event loop; the next answer starts straight from the answering
// goroutine again (before, gnet's buffer was only seen empty after a
// queued write, so every later large answer went through the loop).
func TestDirectWritesResumeAfterAnAnswerOverflowed(t *testing.T) {
	h := newFakeHandler(false)
	s := startServer(t, h, nil)
	c := dial(t, s)
	direct, split := s.cfg.Metrics.AnswerWritesDirect, s.cfg.Metrics.AnswerWritesSplit
	for i := range 3 {
		c.send(produce())
		call := h.next(t, patience)
		parts := 400_000 // about 8 MB: more than the socket takes at once
		if i == 1 {
			parts = 10
		}
		resp := bigProduceAnswer(call, parts)
		directBefore, splitBefore := testutil.ToFloat64(direct), testutil.ToFloat64(split)
		call.Reply(resp)
		switch {
		case i != 1 && testutil.ToFloat64(split) != splitBefore+1:
			t.Fatalf("answer %d was not begun directly and finished through the loop", i)
		case i == 1 && testutil.ToFloat64(direct) != directBefore+1:
			t.Fatalf("the answer after an overflowed one (read whole by the client) went through the event loop")
		}
		// The loop has queued the rest in gnet's buffer before the
		// client reads.
		eventually(t, patience, "the queued write done", func() bool { return s.pendingWrites.Load() == 0 })
		if _, _, err := c.readFrame(patience); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
}
