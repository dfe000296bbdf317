package broker_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// TestFetchLargeRecordSets: answers whose record sets are written from
// the buffers they were read into (wire.EncodeResponseSlices, 16 KiB and
// up) reach a franz-go consumer whole: it checks every batch's CRC, and
// every value comes back as sent.
func TestFetchLargeRecordSets(t *testing.T) {
	b, ctx, sent := brokerWithRandomValues(t, "large", 8, 64, 40<<10)
	c := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("large"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err := consumeSent(ctx, c, sent); err != nil {
		t.Fatal(err)
	}
}

// TestFetchPooledBuffersConcurrentConsumers: record sets are read into
// pooled buffers that go back to the pool once each answer is written;
// four consumers reading the same partitions at once, in answers larger
// than the socket takes at once (so part of each is written later by
// the event loop), keep recycling them. Each consumer gets every value as sent
// (franz-go checks every batch's CRC), so no buffer was reused while an
// answer still referred to it.
func TestFetchPooledBuffersConcurrentConsumers(t *testing.T) {
	b, ctx, sent := brokerWithRandomValues(t, "pooled", 4, 192, 40<<10)
	errs := make(chan error, 4)
	for range 4 {
		c := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("pooled"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchMaxPartitionBytes(1<<20), kgo.FetchMaxBytes(4<<20))
		go func() { errs <- consumeSent(ctx, c, sent) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFetchAnswersBeginDirectlyForAConsumer: a franz-go consumer reads
// each answer whole before it sends its next fetch, so every answer —
// those larger than the socket takes at once too — is begun straight
// from the fetch goroutine, none queued whole through the event loop (before,
// gnet's buffer was seen empty only after a small answer, so after the
// first large one all went through the loop), and the consumer gets
// every value as sent.
func TestFetchAnswersBeginDirectlyForAConsumer(t *testing.T) {
	b, ctx, sent := brokerWithRandomValues(t, "direct", 4, 256, 64<<10)
	m := b.Metrics()
	split0, loop0 := testutil.ToFloat64(m.AnswerWritesSplit), testutil.ToFloat64(m.AnswerWritesLoop)
	// Answers of up to 8 MiB (4 partitions of 2 MiB): 16 MiB of records
	// take two or more.
	c := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("direct"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchMaxPartitionBytes(2<<20), kgo.FetchMaxBytes(8<<20))
	if err := consumeSent(ctx, c, sent); err != nil {
		t.Fatal(err)
	}
	// How many answers overflow the socket depends on how fast the
	// client reads (a 2 MiB answer may fit the socket's buffer whole), so
	// one split answer is what is certain; with the bug every answer after
	// it went through the loop whole, which the check below catches.
	if split := testutil.ToFloat64(m.AnswerWritesSplit) - split0; split < 1 {
		t.Fatalf("%v answers begun directly and finished through the loop, want at least one", split)
	}
	if loop := testutil.ToFloat64(m.AnswerWritesLoop) - loop0; loop != 0 {
		t.Fatalf("%v answers queued whole through the event loop, want none", loop)
	}
}

// brokerWithRandomValues starts a broker with topic, of parts partitions,
// holding records values of size random bytes each, produced round robin
// and uncompressed; it returns the broker, the test's context (2 minutes)
// and the values sent.
func brokerWithRandomValues(t *testing.T, topic string, parts int32, records, size int) (*broker.Broker, context.Context, map[string]bool) {
	t.Helper()
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), topic, parts, nil)
	ctx := brokertest.Context(t, 2*time.Minute)
	p := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
	sent := map[string]bool{}
	for range records {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		sent[string(v)] = true
		p.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return b, ctx, sent
}

// consumeSent polls c until it has read every value in sent, and fails
// on a fetch error or a value that was not sent.
func consumeSent(ctx context.Context, c *kgo.Client, sent map[string]bool) error {
	got := map[string]bool{}
	for len(got) < len(sent) {
		fs := c.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("after %d records: %w", len(got), err)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if !sent[string(r.Value)] && bad == nil {
				bad = fmt.Errorf("record %d at offset %d: not a value that was sent", r.Partition, r.Offset)
			}
			got[string(r.Value)] = true
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}
