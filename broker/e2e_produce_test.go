package broker_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// TestProduceConsumeManyRecords streams 100k records over 6 partitions with
// an idempotent acks=all producer and reads them back: every record exactly
// once, and in produce order within each partition.
func TestProduceConsumeManyRecords(t *testing.T) {
	const (
		topic      = "many"
		partitions = 6
		total      = 100_000
	)
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), topic, partitions, nil)

	producer := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	ctx := brokertest.Context(t, 2*time.Minute)
	errs := make(chan error, 1)
	for i := 0; i < total; i++ {
		r := &kgo.Record{Partition: int32(i % partitions), Value: []byte(strconv.Itoa(i))}
		producer.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- fmt.Errorf("record %s: %w", r.Value, err):
				default:
				}
			}
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	consumer := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make([]bool, total)
	lastInPartition := make([]int, partitions)
	nextOffset := make([]int64, partitions)
	for i := range lastInPartition {
		lastInPartition[i] = -1
	}
	got := 0
	for got < total {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, total, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Value))
			if err != nil || i < 0 || i >= total {
				t.Fatalf("unexpected value %q", r.Value)
			}
			if seen[i] {
				t.Fatalf("record %d delivered twice", i)
			}
			seen[i] = true
			if i%partitions != int(r.Partition) {
				t.Fatalf("record %d in partition %d", i, r.Partition)
			}
			if i <= lastInPartition[r.Partition] {
				t.Fatalf("partition %d: record %d after %d", r.Partition, i, lastInPartition[r.Partition])
			}
			if r.Offset != nextOffset[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, nextOffset[r.Partition])
			}
			nextOffset[r.Partition]++
			lastInPartition[r.Partition] = i
			got++
		})
	}
	for p, n := range nextOffset {
		if want := int64((total - p + partitions - 1) / partitions); n != want {
			t.Errorf("partition %d holds %d records, want %d", p, n, want)
		}
	}
}

// TestProduceCompressionsAndAcks round trips records through every codec
// clients write and every acks level: the broker stores batches as
// produced and consumers decode them unchanged.
func TestProduceCompressionsAndAcks(t *testing.T) {
	b := brokertest.Start(t)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	acks := []struct {
		name string
		opts []kgo.Opt
	}{
		{"acks=0", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks=1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acks=all", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
	}
	for _, c := range codecs {
		for _, a := range acks {
			t.Run(c.name+"/"+a.name, func(t *testing.T) {
				topic := "codec-" + c.name + "-" + a.name[5:]
				brokertest.CreateTopic(t, b.Addr(), topic, 1, nil)
				opts := append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec)}, a.opts...)
				producer := brokertest.Client(t, b.Addr(), opts...)
				ctx := brokertest.Context(t, time.Minute)
				const n = 500
				var want []string
				for i := 0; i < n; i++ {
					// Repetitive values so every codec actually compresses.
					v := fmt.Sprintf("%s-%s-record-%04d-%s", c.name, a.name, i, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
					want = append(want, v)
					producer.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
						if err != nil {
							t.Errorf("produce: %v", err)
						}
					})
				}
				if err := producer.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				got := consumeN(t, b.Addr(), topic, n)
				for i := range want {
					if string(got[i].Value) != want[i] {
						t.Fatalf("record %d = %q, want %q", i, got[i].Value, want[i])
					}
					if got[i].Offset != int64(i) {
						t.Fatalf("record %d at offset %d", i, got[i].Offset)
					}
				}
			})
		}
	}
}

// consumeN reads the first n records of a topic (all partitions) from the
// start, failing the test if they do not arrive within a minute.
func consumeN(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := brokertest.Client(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	defer cl.Close()
	ctx := brokertest.Context(t, time.Minute)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// TestProducePooledFramesKeepEveryByte: Produce frames are read into
// pooled buffers and given back once every partition has answered
// (net/server newFrame, Call.ReleaseFrame). Three producers at once —
// idempotent acks=all, acks=1, acks=0 — send uncompressed batches of
// tens of KiB (pooled frames) to the same partitions, each record's value
// a function of its producer and index; every record read back is exactly
// what was sent, so no batch was written from a buffer another request had
// been read into (run with -race, which also sees such a reuse).
func TestProducePooledFramesKeepEveryByte(t *testing.T) {
	const (
		topic      = "pooled"
		partitions = 3
		perClient  = 3000
	)
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), topic, partitions, nil)
	ctx := brokertest.Context(t, 2*time.Minute)
	value := func(p, i int) []byte {
		return []byte(fmt.Sprintf("%d-%d-%s", p, i, strings.Repeat(string(rune('a'+(p*7+i)%26)), 1000+i%1000)))
	}
	clients := [][]kgo.Opt{
		{kgo.RequiredAcks(kgo.AllISRAcks())},
		{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()},
		{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()},
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for p, opts := range clients {
		cl := brokertest.Client(t, b.Addr(), append(opts, kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(48<<10), kgo.ProducerLinger(5*time.Millisecond))...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				cl.Produce(ctx, &kgo.Record{Value: value(p, i)}, func(r *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- fmt.Errorf("producer %d: %w", p, err):
						default:
						}
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	consumer := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	for len(seen) < len(clients)*perClient {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(seen), len(clients)*perClient, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			var p, i int
			if _, err := fmt.Sscanf(string(r.Value), "%d-%d-", &p, &i); err != nil || p < 0 || p >= len(clients) || i < 0 || i >= perClient {
				t.Fatalf("unexpected record at %d/%d: %.40q", r.Partition, r.Offset, r.Value)
			}
			if want := value(p, i); string(r.Value) != string(want) {
				t.Fatalf("record %d of producer %d at %d/%d changed: %.60q, want %.60q", i, p, r.Partition, r.Offset, r.Value, want)
			}
			key := fmt.Sprint(p, "-", i)
			if seen[key] && p == 0 {
				t.Fatalf("record %d of the idempotent producer read twice", i)
			}
			seen[key] = true
		})
	}
}
