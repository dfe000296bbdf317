package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
)

// Fetch costs by partition count, through the wire (issue 13): go test
// -bench Fetch ./broker/, or under callgrind for instruction counts that
// do not depend on the machine's load.

// fetchAll is a sessionless fetch of partitions 0..len(offsets)-1 of
// topic at offsets (1 MiB each, 50 MiB in all).
func fetchAll(topic string, offsets []int64, maxWait time.Duration, minBytes int32) *kmsg.FetchRequest {
	req := brokertest.FetchRequest(topic, 0, offsets[0], maxWait, minBytes, 50<<20, 1<<20)
	rt := &req.Topics[0]
	for p := 1; p < len(offsets); p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.LogStartOffset = int32(p), offsets[p], 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req
}

// BenchmarkFetchCaughtUp: a consumer at the end of every partition polls
// with MaxWait 0: what one fetch costs per partition it names.
func BenchmarkFetchCaughtUp(b *testing.B) {
	for _, n := range []int{6, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			br := brokertest.Start(b)
			brokertest.CreateTopic(b, br.Addr(), "caught-up", int32(n), nil)
			c := brokertest.Dial(b, br.Addr())
			frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, fetchAll("caught-up", make([]int64, n), 0, 0), 1)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.WriteRaw(frame)
				if _, _, err := c.ReadFrame(10 * time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetchWake: a long poll on every partition of a topic is woken
// by one record appended to one of them (acknowledged before fsync, so
// the fsync stays out of the figure); an op is append, wake-up and
// answer.
func BenchmarkFetchWake(b *testing.B) {
	for _, n := range []int{6, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			br := brokertest.Start(b, brokertest.WithConfig(func(c *broker.Config) { c.FlushInterval = time.Second }))
			brokertest.CreateTopic(b, br.Addr(), "wake", int32(n), nil)
			fc := brokertest.Dial(b, br.Addr())
			pc := brokertest.Dial(b, br.Addr())
			offsets := make([]int64, n)
			f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				p := i % n
				fc.WriteRaw(f.AppendRequest(nil, fetchAll("wake", offsets, 10*time.Second, 1), int32(i)))
				pc.WriteRaw(f.AppendRequest(nil, brokertest.ProduceRequest("wake", int32(p), 1, brokertest.Batch("x")), int32(i)))
				if _, _, err := pc.ReadFrame(10 * time.Second); err != nil {
					b.Fatal(err)
				}
				if _, _, err := fc.ReadFrame(10 * time.Second); err != nil {
					b.Fatal(err)
				}
				offsets[p]++
			}
		})
	}
}

// BenchmarkFetchCaughtUpInSession is BenchmarkFetchCaughtUp for a
// consumer in a fetch session (KIP-227), as franz-go, librdkafka and the
// Java client fetch: after the full fetch that creates the session, each
// op is an incremental fetch naming no partition, answered with none.
func BenchmarkFetchCaughtUpInSession(b *testing.B) {
	for _, n := range []int{6, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			br := brokertest.Start(b)
			brokertest.CreateTopic(b, br.Addr(), "caught-up", int32(n), nil)
			c := brokertest.Dial(b, br.Addr())
			full := fetchAll("caught-up", make([]int64, n), 0, 0)
			full.SessionEpoch = 0
			id := c.RoundTrip(full).(*kmsg.FetchResponse).SessionID
			f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
			inc := brokertest.FetchRequest("caught-up", 0, 0, 0, 0, 50<<20, 1<<20)
			inc.SessionID, inc.Topics = id, nil
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				inc.SessionEpoch = int32(i + 1)
				c.WriteRaw(f.AppendRequest(nil, inc, int32(i)))
				if _, _, err := c.ReadFrame(10 * time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
