package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/storage/durable"
	"kaas/storage/vfs/memfs"
)

// TestPowerLossKeepsWhatWasAcknowledged runs a broker on the in-memory
// filesystem, produces and commits offsets while it simulates a power
// loss at a random moment (keeping a random part of what was not
// fsynced), then starts a new broker on what the disk would hold: every
// acknowledged record and commit is there, the topic created before is
// there with all its partitions (their directory entries were fsynced:
// issue 9 row 14), and the new broker takes writes.
func TestPowerLossKeepsWhatWasAcknowledged(t *testing.T) {
	for round := 0; round < memfs.Iterations(2); round++ {
		t.Run(fmt.Sprint(round), powerLossRound)
	}
}

func powerLossRound(t *testing.T) {
	dir := t.TempDir()
	m := memfs.New()
	if err := durable.MkdirAll(m, dir); err != nil {
		t.Fatal(err)
	}
	start := func(fs *memfs.FS) *broker.Broker {
		b, err := broker.Start(brokertest.Config(t, dir, brokertest.WithConfig(func(c *broker.Config) { c.FS = fs })))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := start(m)
	brokertest.CreateTopic(t, b.Addr(), "power", 3, nil)
	cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("power"))
	adm := brokertest.Admin(t, b.Addr())

	var mu sync.Mutex
	acked := map[string]bool{}
	committed := int64(-1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("r%06d", i)
			cl.Produce(ctx, kgo.StringRecord(v), func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[v] = true
					mu.Unlock()
				}
			})
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for off := int64(1); ctx.Err() == nil; off++ {
			var os kadm.Offsets
			os.AddOffset("power", 0, off, -1)
			if err := adm.CommitAllOffsets(ctx, "g", os); err == nil {
				mu.Lock()
				committed = off
				mu.Unlock()
			}
		}
	}()
	brokertest.Eventually(t, 30*time.Second, "acknowledged records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 500 && committed > 5
	})
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	mu.Lock()
	crashed := m.Crash(memfs.CrashOptions{Rand: rand.New(rand.NewPCG(rand.Uint64(), 1))})
	wantRecords := make([]string, 0, len(acked))
	for v := range acked {
		wantRecords = append(wantRecords, v)
	}
	wantCommitted := committed
	mu.Unlock()
	cancel()
	wg.Wait()
	cl.Close()
	b.Close(context.Background()) // the lost machine; nothing reaches the crash image

	b = start(crashed)
	t.Cleanup(func() { brokertest.Stop(t, b) })
	got := map[string]bool{}
	cons := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("power"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	end := brokertest.Admin(t, b.Addr())
	ends, err := end.ListEndOffsets(brokertest.Context(t, 30*time.Second), "power")
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	for n := int64(0); n < total; {
		fs := cons.PollFetches(brokertest.Context(t, 30*time.Second))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)] = true
			n++
		})
	}
	var lost []string
	for _, v := range wantRecords {
		if !got[v] {
			lost = append(lost, v)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged records lost, e.g. %s\n%s", len(lost), len(wantRecords), strings.Join(lost[:min(5, len(lost))], " "), crashed.Dump())
	}
	fetched, err := end.FetchOffsets(brokertest.Context(t, 30*time.Second), "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := fetched.Lookup("power", 0); !ok || o.At < wantCommitted {
		t.Fatalf("committed offset %+v after the power loss, %d was acknowledged", o, wantCommitted)
	}
	if err := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("power")).ProduceSync(brokertest.Context(t, 30*time.Second), kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
