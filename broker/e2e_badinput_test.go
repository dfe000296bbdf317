package broker_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// healthyClient produces and consumes continuously on its own topic until
// stop is called, which reports any error it saw and whether it read back
// everything it wrote.
func healthyClient(t *testing.T, addr string) (stop func() error) {
	t.Helper()
	brokertest.CreateTopic(t, addr, "healthy", 1, nil)
	producer := brokertest.Client(t, addr, kgo.DefaultProduceTopic("healthy"))
	consumer := brokertest.Client(t, addr, kgo.ConsumeTopics("healthy"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	produced, consumed := 0, 0
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if err := producer.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
				if ctx.Err() == nil {
					fail(fmt.Errorf("healthy produce %d: %w", i, err))
				}
				return
			}
			mu.Lock()
			produced++
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // a steady trickle, not a flood
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := consumer.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if ctx.Err() == nil {
					fail(fmt.Errorf("healthy fetch: %w", err))
				}
			})
			mu.Lock()
			consumed += len(fs.Records())
			mu.Unlock()
		}
	}()
	return func() error {
		// Let the consumer catch up with what was produced, then stop.
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			p, c, err := produced, consumed, firstErr
			mu.Unlock()
			if err != nil || (p > 0 && c >= p) || time.Now().After(deadline) {
				cancel()
				wg.Wait()
				if err == nil && (p == 0 || c < p) {
					err = fmt.Errorf("healthy client produced %d, consumed %d", p, c)
				}
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// frame prefixes body with its size.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// requestBody is a request's frame without its size prefix.
func requestBody(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("bad")).AppendRequest(nil, req, corr)[4:]
}

// TestBadInput throws malformed bytes at the broker while a healthy
// franz-go client produces and consumes: each bad connection is closed
// (or answered, where Apache answers), the broker never falls over and
// the healthy client never notices.
func TestBadInput(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.MaxRequestBytes = 1 << 20 }))
	stop := healthyClient(t, b.Addr())
	closed := func(t *testing.T, c *brokertest.Conn, what string) {
		t.Helper()
		if !c.Closed(5 * time.Second) {
			t.Fatalf("the broker kept the connection open after %s", what)
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(9)
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("healthy")}}
	whole := requestBody(meta, 1)

	t.Run("random bytes", func(t *testing.T) {
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 300; i++ {
			c := brokertest.Dial(t, b.Addr())
			junk := make([]byte, 1+rng.Intn(256))
			rng.Read(junk)
			c.WriteRaw(junk)
			c.Close()
		}
	})
	t.Run("random bodies behind valid sizes", func(t *testing.T) {
		rng := rand.New(rand.NewSource(2))
		for i := 0; i < 300; i++ {
			c := brokertest.Dial(t, b.Addr())
			body := make([]byte, 8+rng.Intn(200))
			rng.Read(body)
			// A real key and a version it supports, so the bytes reach
			// the decoder and, if they decode, a handler.
			keys := []int16{0, 1, 2, 3, 18, 19, 20, 21, 32, 37, 44, 60}
			key := keys[rng.Intn(len(keys))]
			binary.BigEndian.PutUint16(body[0:], uint16(key))
			binary.BigEndian.PutUint16(body[2:], uint16(rng.Intn(4)))
			c.WriteRaw(frame(body))
			c.Closed(20 * time.Millisecond) // answered or closed: either is fine
			c.Close()
		}
	})
	t.Run("truncated body", func(t *testing.T) {
		c := brokertest.Dial(t, b.Addr())
		c.WriteRaw(frame(whole[:len(whole)-3]))
		closed(t, c, "a frame whose body ends early")
	})
	t.Run("truncated header", func(t *testing.T) {
		c := brokertest.Dial(t, b.Addr())
		c.WriteRaw(frame(whole[:5]))
		closed(t, c, "a frame shorter than a request header")
	})
	t.Run("frame cut off by the client", func(t *testing.T) {
		c := brokertest.Dial(t, b.Addr())
		c.WriteRaw(frame(whole)[:len(whole)/2])
		c.Close() // the broker must drop the half frame it buffered
	})
	t.Run("oversize frame", func(t *testing.T) {
		c := brokertest.Dial(t, b.Addr())
		c.WriteRaw(binary.BigEndian.AppendUint32(nil, 2<<20)) // > --max-request-bytes, no body sent
		closed(t, c, "a size prefix over --max-request-bytes")
	})
	t.Run("negative size", func(t *testing.T) {
		c := brokertest.Dial(t, b.Addr())
		c.WriteRaw([]byte{0xff, 0xff, 0xff, 0xf0})
		closed(t, c, "a negative size prefix")
	})
	for _, key := range []int16{9999, 57 /* UpdateFeatures: known to Kafka, not served by kaas */} {
		t.Run(fmt.Sprintf("unknown api key %d", key), func(t *testing.T) {
			c := brokertest.Dial(t, b.Addr())
			body := append([]byte(nil), whole...)
			binary.BigEndian.PutUint16(body, uint16(key))
			c.WriteRaw(frame(body))
			closed(t, c, "an unknown api key")
		})
	}
	t.Run("unsupported ApiVersions version (KIP-511)", func(t *testing.T) {
		c := brokertest.Dial(t, b.Addr())
		body := requestBody(kmsg.NewPtrApiVersionsRequest(), 7)
		binary.BigEndian.PutUint16(body[2:], 99)
		c.WriteRaw(frame(body))
		corr, resp, err := c.ReadFrame(5 * time.Second)
		if err != nil || corr != 7 {
			t.Fatalf("no answer: corr %d, %v", corr, err)
		}
		v0 := kmsg.NewPtrApiVersionsResponse() // answered at v0
		if err := v0.ReadFrom(resp); err != nil {
			t.Fatalf("the answer is not an ApiVersions v0 response: %v", err)
		}
		if v0.ErrorCode != kerr.UnsupportedVersion.Code || len(v0.ApiKeys) == 0 {
			t.Fatalf("error %v with %d keys, want UNSUPPORTED_VERSION and the list", kerr.ErrorForCode(v0.ErrorCode), len(v0.ApiKeys))
		}
		// The connection stays usable, as in Apache.
		if r := c.RoundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Fatalf("ApiVersions after the fallback: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	})
	for _, tc := range []struct {
		name    string
		key, v  int16
		request kmsg.Request
	}{
		{"Metadata v99", 3, 99, meta},
		{"Produce v13 (topic ids, not served yet)", 0, 13, kmsg.NewPtrProduceRequest()},
		{"Fetch v19 (beyond what kmsg decodes)", 1, 19, kmsg.NewPtrFetchRequest()},
		{"EndTxn v6 (beyond what kmsg decodes)", 26, 6, kmsg.NewPtrEndTxnRequest()},
	} {
		t.Run("unsupported "+tc.name, func(t *testing.T) {
			c := brokertest.Dial(t, b.Addr())
			body := requestBody(tc.request, 3)
			binary.BigEndian.PutUint16(body[2:], uint16(tc.v))
			c.WriteRaw(frame(body))
			closed(t, c, "an unsupported version (Apache closes the connection)")
		})
	}

	if err := stop(); err != nil {
		t.Fatalf("the healthy client was disturbed: %v", err)
	}
	// And the broker still answers new connections.
	if r := brokertest.Dial(t, b.Addr()).RoundTrip(meta).(*kmsg.MetadataResponse); len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata after the abuse: %+v", r.Topics)
	}
}

// messageV1 encodes one magic-1 message set entry (pre-0.11 format).
func messageV1(value string) []byte {
	var msg []byte
	msg = append(msg, 1, 0)                                                  // magic, attributes
	msg = binary.BigEndian.AppendUint64(msg, uint64(time.Now().UnixMilli())) // timestamp
	msg = binary.BigEndian.AppendUint32(msg, 0xffffffff)                     // null key
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(value)))
	msg = append(msg, value...)
	crc := crc32.ChecksumIEEE(msg)
	out := binary.BigEndian.AppendUint64(nil, 0) // offset
	out = binary.BigEndian.AppendUint32(out, uint32(4+len(msg)))
	out = binary.BigEndian.AppendUint32(out, crc)
	return append(out, msg...)
}

// TestProduceRejects: produce input a client can get wrong gets Apache's
// error code for that partition, nothing is written, and the connection
// stays usable.
func TestProduceRejects(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "strict", 1, nil)
	c := brokertest.Dial(t, b.Addr())
	good := brokertest.Batch("ok")
	corrupt := brokertest.Batch("bad crc")
	corrupt[len(corrupt)-1] ^= 0x01
	control := brokertest.Batch("ctl")
	binary.BigEndian.PutUint16(control[21:], 0x20)
	brokertest.FixCRC(control)
	for _, tc := range []struct {
		name    string
		topic   string
		acks    int16
		records []byte
		want    int16
	}{
		{"magic 1 message set (Apache: INVALID_RECORD)", "strict", -1, messageV1("old"), kerr.InvalidRecord.Code},
		{"corrupt CRC", "strict", -1, corrupt, kerr.CorruptMessage.Code},
		{"two batches for one partition", "strict", -1, append(append([]byte(nil), good...), good...), kerr.InvalidRecord.Code},
		{"records that stop mid-batch (no whole batch)", "strict", -1, good[:len(good)-4], kerr.InvalidRecord.Code},
		{"a batch length below any batch", "strict", -1, []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00"), kerr.CorruptMessage.Code},
		{"no records", "strict", -1, nil, kerr.InvalidRecord.Code},
		{"a control batch from a client", "strict", -1, control, kerr.InvalidRecord.Code},
		{"acks=2", "strict", 2, good, kerr.InvalidRequiredAcks.Code},
		{"unknown partition", "strict", -1, good, kerr.UnknownTopicOrPartition.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := brokertest.ProduceRequest(tc.topic, 0, tc.acks, tc.records)
			if tc.name == "unknown partition" {
				req.Topics[0].Partitions[0].Partition = 7
			}
			p := c.RoundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
			if p.ErrorCode != tc.want || p.BaseOffset != -1 {
				t.Fatalf("%v at %d, want %v", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, kerr.ErrorForCode(tc.want))
			}
		})
	}
	// zstd needs Produce v7 (UNSUPPORTED_COMPRESSION_TYPE before).
	zstd := brokertest.Batch("z")
	binary.BigEndian.PutUint16(zstd[21:], 4)
	brokertest.FixCRC(zstd)
	req := brokertest.ProduceRequest("strict", 0, -1, zstd)
	req.SetVersion(6)
	if p := c.RoundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnsupportedCompressionType.Code {
		t.Fatalf("zstd on v6: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := c.RoundTrip(brokertest.ProduceRequest("strict", 0, -1, good)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("a good batch after the bad ones: %v at %d (nothing bad may have been written)", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	// A whole batch followed by a partial one: Apache trims the partial
	// bytes and appends the batch.
	tail := append(append([]byte(nil), good...), good[:20]...)
	if p := c.RoundTrip(brokertest.ProduceRequest("strict", 0, -1, tail)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("a batch with trailing partial bytes: %v at %d, want it appended at 1", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
	brokertest.CheckWholeBatches(t, filepath.Join(b.DataDir(), "strict-0"))
}
