package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareAcksUnderFlushInterval: with --flush-interval-ms share
// acknowledgements are answered once written to the share state log, with
// no fsync of it (an hour's interval: none runs before the stop), and a
// clean stop makes them durable: after a restart the accepted records are
// not delivered again.
func TestShareAcksUnderFlushInterval(t *testing.T) {
	dir := t.TempDir()
	mutate := func(c *Config) {
		shareTimings(time.Minute, 5)(c)
		c.ShareSessionTimeout = time.Minute
		c.FlushInterval = time.Hour
	}
	b := startGroupBroker(t, dir, mutate)
	createGroupTopic(t, newAdmin(t, b.Addr()), "w", 1)
	produce(t, b.Addr(), "w", 0, 20)
	tid := topicIDOf(t, b, "w")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if hb := shareHeartbeat(t, ctx, cl, "sg", "m1", 0, "w"); hb.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(hb.ErrorCode))
	}
	acquired(t, "m1's fetch", shareFetchMode(t, ctx, cl, "sg", "m1", 0, tid, nil, 5000, 10, 1), 0, 9, 1)
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}}}
	f := shareFetchMode(t, ctx, cl, "sg", "m1", 1, tid, accept, 0, 10, 1)
	if code := ackCode(f); code != 0 {
		t.Fatalf("acceptance of 0-9: %v", kerr.ErrorForCode(code))
	}
	if n := sampleCount(t, b.metrics.ShareStateFsyncDuration); n != 0 {
		t.Fatalf("%d share state fsyncs before any interval passed; want the acknowledgement not to wait for one", n)
	}
	cl.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	b2 := startGroupBroker(t, dir, mutate)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b2.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if hb := shareHeartbeat(t, ctx, cl2, "sg", "m2", 0, "w"); hb.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(hb.ErrorCode))
	}
	// 10-19 were acquired by m1 and released by its session's end or
	// the restart; 0-9 stay accepted.
	r := shareFetchMode(t, ctx, cl2, "sg", "m2", 0, tid, nil, 5000, 100, 1)
	for _, tp := range r.Topics {
		for _, p := range tp.Partitions {
			for _, a := range p.AcquiredRecords {
				if a.FirstOffset < 10 {
					t.Fatalf("after the restart %d-%d delivered again; 0-9 were accepted", a.FirstOffset, a.LastOffset)
				}
			}
		}
	}
	if acquiredCount(r) == 0 {
		t.Fatalf("after the restart nothing acquired: %+v", r)
	}
}
