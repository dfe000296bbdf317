package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/storage/durable"
	"kaas/storage/vfs/memfs"
)

// TestPowerLossKeepsShareAcknowledgements: a franz-go share consumer
// accepts records on a broker on the in-memory filesystem; a power loss
// at a random moment keeps a random part of what was not fsynced. On what
// the disk would hold, a new broker delivers every record the consumer
// was never handed, and none whose acknowledgement was answered (one in
// flight may come back or not).
func TestPowerLossKeepsShareAcknowledgements(t *testing.T) {
	for round := 0; round < memfs.Iterations(2); round++ {
		t.Run(fmt.Sprint(round), sharePowerLossRound)
	}
}

func sharePowerLossRound(t *testing.T) {
	dir := t.TempDir()
	m := memfs.New()
	if err := durable.MkdirAll(m, dir); err != nil {
		t.Fatal(err)
	}
	start := func(fs *memfs.FS) *broker.Broker {
		b, err := broker.Start(brokertest.Config(t, dir, brokertest.WithConfig(func(c *broker.Config) {
			c.FS = fs
			c.ShareAutoOffsetReset = "earliest"
			c.ShareHeartbeatInterval = 100 * time.Millisecond
		})))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start(m)
	brokertest.CreateTopic(t, b.Addr(), "queue", 1, nil)
	const n = 600
	prod := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("queue"))
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, kgo.StringRecord(fmt.Sprint(i)))
	}
	if err := prod.ProduceSync(brokertest.Context(t, 30*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	acked := map[int64]bool{}     // acknowledgement answered
	delivered := map[int64]bool{} // handed to the consumer: its acknowledgement may be in doubt
	ctx, cancel := context.WithCancel(context.Background())
	cl := brokertest.Client(t, b.Addr(), kgo.ShareGroup("pg"), kgo.ConsumeTopics("queue"), kgo.ShareMaxRecords(20))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var offs []int64
			mu.Lock()
			for r := range fs.RecordsAll() {
				r.Ack(kgo.AckAccept)
				offs = append(offs, r.Offset)
				delivered[r.Offset] = true
			}
			mu.Unlock()
			if err := cl.FlushAcks(ctx); err != nil {
				return
			}
			mu.Lock()
			for _, o := range offs {
				acked[o] = true
			}
			mu.Unlock()
		}
	}()
	brokertest.Eventually(t, 30*time.Second, "acknowledged records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 100
	})
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // a random moment, as the other power-loss rounds
	mu.Lock()
	crashed := m.Crash(memfs.CrashOptions{Rand: rand.New(rand.NewPCG(rand.Uint64(), 1))})
	want, doubt := map[int64]bool{}, map[int64]bool{}
	for o := range acked {
		want[o] = true
	}
	for o := range delivered {
		doubt[o] = !acked[o]
	}
	mu.Unlock()
	cancel()
	<-done
	cl.Close()
	b.Close(context.Background()) // the lost machine; nothing reaches the crash image

	b = start(crashed)
	t.Cleanup(func() { brokertest.Stop(t, b) })
	cons := brokertest.Client(t, b.Addr(), kgo.ShareGroup("pg"), kgo.ConsumeTopics("queue"))
	got := map[int64]bool{}
	missing := func() int {
		k := 0
		for o := int64(0); o < n; o++ {
			if !want[o] && !doubt[o] && !got[o] {
				k++
			}
		}
		return k
	}
	for missing() > 0 {
		fs := cons.PollFetches(brokertest.Context(t, 30*time.Second))
		if err := fs.Err(); err != nil {
			t.Fatalf("after the power loss: %v (%d delivered, %d acknowledged before)", err, len(got), len(want))
		}
		for r := range fs.RecordsAll() {
			if want[r.Offset] {
				t.Fatalf("offset %d delivered again after its acknowledgement was answered\n%s", r.Offset, crashed.Dump())
			}
			got[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
		if err := cons.FlushAcks(brokertest.Context(t, 30*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}
