package broker_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// Issue 21: acks=0 produce requests get no answer, and each gives its
// in-flight place on the connection back once its records are appended.
// Thousands of them on one connection are all stored, in order, and a
// request with an answer after them on the same connection is answered
// and sees every one. kaas used to stop reading the connection after 32
// (the in-flight limit): the read loop woke only when an answer frame was
// written.
func TestAcksZeroManyRequestsOnOneConnection(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "acks0-raw", 1, nil)
	c := brokertest.Dial(t, b.Addr())
	const n = 3000
	for i := range n {
		c.Send(brokertest.ProduceRequest("acks0-raw", 0, 0, brokertest.Batch(strconv.Itoa(i))))
	}
	corr := c.Send(brokertest.ProduceRequest("acks0-raw", 0, 1, brokertest.Batch("answered")))
	got, resp, err := c.Read(30 * time.Second)
	if err != nil || got != corr {
		t.Fatalf("the acks=1 produce after %d acks=0 ones: correlation id %d, %v; want %d", n, got, err, corr)
	}
	p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.BaseOffset != n {
		t.Fatalf("the acks=1 produce: error %d at offset %d, want offset %d (after every acks=0 record)", p.ErrorCode, p.BaseOffset, n)
	}
	recs := consumeN(t, b.Addr(), "acks0-raw", n+1)
	for i, r := range recs[:n] {
		if string(r.Value) != strconv.Itoa(i) || r.Offset != int64(i) {
			t.Fatalf("record at offset %d is %q, want %q at %d", r.Offset, r.Value, strconv.Itoa(i), i)
		}
	}
}

// The same through real clients: franz-go with kgo.NoAck sending one
// record per request, and kcat (librdkafka) with acks=0 and one message
// per batch, then an answered request from the same franz-go client.
func TestAcksZeroClients(t *testing.T) {
	b := brokertest.Start(t)
	t.Run("franz-go", func(t *testing.T) {
		brokertest.CreateTopic(t, b.Addr(), "acks0-kgo", 1, nil)
		cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("acks0-kgo"),
			kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
		ctx := brokertest.Context(t, time.Minute)
		const n = 2000
		for i := range n {
			// Sync: each record is its own request on the produce connection.
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		recs := consumeN(t, b.Addr(), "acks0-kgo", n)
		for i, r := range recs {
			if string(r.Value) != strconv.Itoa(i) {
				t.Fatalf("record %d is %q", i, r.Value)
			}
		}
	})
	t.Run("kcat", func(t *testing.T) {
		brokertest.CreateTopic(t, b.Addr(), "acks0-kcat", 1, nil)
		const n = 500
		var lines []string
		for i := range n {
			lines = append(lines, fmt.Sprintf("line-%03d", i))
		}
		kcat(t, strings.Join(lines, "\n")+"\n", "-b", b.Addr(), "-t", "acks0-kcat", "-P", "-q",
			"-X", "acks=0", "-X", "batch.num.messages=1", "-X", "linger.ms=0")
		recs := consumeN(t, b.Addr(), "acks0-kcat", n)
		for i, r := range recs {
			if string(r.Value) != lines[i] {
				t.Fatalf("record %d is %q, want %q", i, r.Value, lines[i])
			}
		}
	})
}
