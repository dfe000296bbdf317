package broker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShareAcksSurviveSIGKILL: a franz-go share consumer accepts records
// one poll at a time while `kaas serve` is SIGKILLed mid-stream; after a
// restart on the same data directory, a new share consumer gets every
// record the first one was never handed (those it had acquired and
// buffered come back at once, not after their locks) and none whose
// acknowledgement was answered; a record handed over whose
// acknowledgement was in flight may come back or not.
func TestShareAcksSurviveSIGKILL(t *testing.T) {
	bin := buildKaas(t)
	for _, m := range killModes {
		t.Run(m.name, func(t *testing.T) { shareAcksSurviveSIGKILL(t, bin, m.flags) })
	}
}

func shareAcksSurviveSIGKILL(t *testing.T, bin string, mode []string) {
	dir := t.TempDir()
	flags := append([]string{"--share-auto-offset-reset", "earliest", "--group-share-heartbeat-interval", "100ms"}, mode...)
	p := serveKaas(t, bin, dir, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const n = 2000
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("tasks"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, 1, 1, nil, "tasks"); err != nil {
		t.Fatal(err)
	}
	// In batches of 20: whole batches are acquired (batch_optimized), so
	// one batch of all would be handed out and acknowledged at once.
	for i := 0; i < n; i += 20 {
		var recs []*kgo.Record
		for j := i; j < i+20; j++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%d", j)})
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	prod.Close()

	var (
		mu        sync.Mutex
		acked     = map[int64]bool{} // acknowledgement answered without error
		delivered = map[int64]bool{} // handed to the consumer: its acknowledgement may be in doubt
	)
	var failed atomic.Bool
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ShareGroup("sg"), kgo.ConsumeTopics("tasks"), kgo.ShareMaxRecords(50),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			for _, r := range rs {
				if r.Err != nil {
					failed.Store(true)
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	// The consumer stops when told the broker is dead: against a dead
	// broker a poll returns nothing and a FlushAcks with nothing to send
	// succeeds, so it would otherwise spin until the test's timeout (the
	// round took ~90 s, 1 run in 3).
	cctx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(cctx, 2*time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			var offs []int64
			mu.Lock()
			for r := range fs.RecordsAll() {
				r.Ack(kgo.AckAccept)
				offs = append(offs, r.Offset)
				delivered[r.Offset] = true
			}
			mu.Unlock()
			failed.Store(false)
			fctx, fcancel := context.WithTimeout(cctx, 2*time.Second)
			err := cl.FlushAcks(fctx)
			fcancel()
			if err != nil || failed.Load() {
				return // the broker is gone: these acks are in doubt
			}
			mu.Lock()
			for _, o := range offs {
				acked[o] = true
			}
			done := len(acked)
			mu.Unlock()
			if done >= n {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		k := len(acked)
		mu.Unlock()
		if k >= n/4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d records acknowledged before the kill", k)
		}
		time.Sleep(5 * time.Millisecond) // polling the consumer's progress, not waiting for time
	}
	p.kill()
	stopConsumer()
	<-consumed
	// The dead broker's client: there is no group left to leave; leaving
	// with a canceled context first makes Close immediate (franz-go's
	// documented fast shutdown) instead of retrying the dead address.
	gone, leave := context.WithCancel(context.Background())
	leave()
	_ = cl.LeaveGroupContext(gone)
	cl.Close()
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	if before >= n {
		t.Fatalf("everything acknowledged before the kill; nothing to check")
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel2()
	p2 := serveKaas(t, bin, dir, flags...)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(p2.addr), kgo.ShareGroup("sg"), kgo.ConsumeTopics("tasks"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	got := map[int64]bool{}
	missing := func() int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for o := int64(0); o < n; o++ {
			if !acked[o] && !delivered[o] && !got[o] {
				k++
			}
		}
		return k
	}
	for missing() > 0 {
		if ctx.Err() != nil {
			t.Fatalf("after the restart: %d records, %d acknowledged before, %d produced", len(got), before, n)
		}
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cl2.PollFetches(pctx)
		pcancel()
		for r := range fs.RecordsAll() {
			mu.Lock()
			again := acked[r.Offset]
			mu.Unlock()
			if again {
				t.Fatalf("offset %d delivered again after its acknowledgement was answered (delivery %d)", r.Offset, r.DeliveryCount())
			}
			got[r.Offset] = true
			r.Ack(kgo.AckAccept)
		}
		if err := cl2.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d acknowledged before the kill, %d delivered after the restart", before, len(got))
}
