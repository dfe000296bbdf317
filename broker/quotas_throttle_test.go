package broker_test

// A franz-go producer and consumer held to their byte-rate quotas: over
// 10 s each moves no more than its quota (+10%), is told throttle times,
// and without a quota moves far faster. This measures a rate over a
// window, not a latency: a loaded machine only makes the clients slower,
// which the upper bound tolerates. The 10 s are measured after one whole
// quota window (11 s) of warm-up: a new client's rate is measured over
// at least 10 s from its first byte (Apache's Rate), so its first burst
// may hold up to about 11 s of quota. The bound is the quota +15%, not
// +10%: Apache's measure itself lets a greedy client run up to about 10%
// over its quota in steady state (a purged sample restarts at the purge
// time, which can shorten the window the sum is divided by), and the
// test counts record values where the broker counts whole requests.

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// throttleHook counts the throttle times a client is told.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

func TestClientsHeldToByteRateQuotas(t *testing.T) {
	const (
		produceQuota = 256 << 10 // bytes/s
		fetchQuota   = 256 << 10
		valueSize    = 1000
		warmUp       = 11 * time.Second
		window       = 10 * time.Second
	)
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr(), "held", 1, nil)
	brokertest.CreateTopic(t, b.Addr(), "prefilled", 1, nil)
	// Uncompressed: the quota counts bytes on the wire, which
	// compression would make far fewer than the values sent.
	value := make([]byte, valueSize)
	_, _ = rand.Read(value)
	plain := kgo.ProducerBatchCompression(kgo.NoCompression())

	// Without a quota: the prefill runs far above either quota.
	fill := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("prefilled"), kgo.ClientID("filler"), plain)
	const prefill = 30 * fetchQuota
	start := time.Now()
	var rs []*kgo.Record
	for range prefill / valueSize {
		rs = append(rs, &kgo.Record{Value: value})
	}
	if err := fill.ProduceSync(brokertest.Context(t, 60*time.Second), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if rate := float64(prefill) / time.Since(start).Seconds(); rate < 2*fetchQuota {
		t.Fatalf("unquota'd produce ran at %.0f B/s, not faster than the quotas", rate)
	}

	adm := brokertest.Admin(t, b.Addr())
	alterQuotas(t, adm,
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "held-producer"), Ops: []kadm.AlterClientQuotaOp{setQuota("producer_byte_rate", produceQuota)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "held-consumer"), Ops: []kadm.AlterClientQuotaOp{setQuota("consumer_byte_rate", fetchQuota)}},
	)

	var pHook, cHook throttleHook
	prod := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("held"), kgo.ClientID("held-producer"),
		kgo.WithHooks(&pHook), plain,
		// Small requests: a produce request over the quota is still
		// appended (and then throttled), so each one may overshoot by
		// its size, as on Apache.
		kgo.ProducerBatchMaxBytes(16<<10), kgo.MaxBufferedRecords(64))
	cons := brokertest.Client(t, b.Addr(), kgo.ClientID("held-consumer"), kgo.WithHooks(&cHook),
		kgo.ConsumeTopics("prefilled"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))

	ctx, cancel := context.WithTimeout(context.Background(), warmUp+window)
	defer cancel()
	from := time.Now().Add(warmUp)
	counting := func() bool { return time.Now().After(from) && ctx.Err() == nil }
	var produced, consumed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			prod.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil && counting() {
					produced.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			if counting() {
				fs.EachRecord(func(r *kgo.Record) { consumed.Add(int64(len(r.Value))) })
			}
		}
	}()
	wg.Wait()
	secs := window.Seconds()
	pRate, cRate := float64(produced.Load())/secs, float64(consumed.Load())/secs
	t.Logf("producer %.0f B/s (quota %d, %.2f×), consumer %.0f B/s (quota %d, %.2f×); throttled %d and %d times",
		pRate, produceQuota, pRate/produceQuota, cRate, fetchQuota, cRate/fetchQuota, pHook.n.Load(), cHook.n.Load())
	if pRate > 1.15*produceQuota || cRate > 1.15*fetchQuota {
		t.Fatalf("a client ran above its quota +15%%: producer %.2f×, consumer %.2f×", pRate/produceQuota, cRate/fetchQuota)
	}
	if pRate < 0.3*produceQuota || cRate < 0.3*fetchQuota {
		t.Fatalf("a client held far below its quota: producer %.2f×, consumer %.2f×", pRate/produceQuota, cRate/fetchQuota)
	}
	if pHook.n.Load() == 0 || cHook.n.Load() == 0 {
		t.Fatalf("throttle times reported: producer %d, consumer %d; want both > 0", pHook.n.Load(), cHook.n.Load())
	}
	if v := metric(t, b, "kaas_quota_throttles_total", "quota", "produce", "client_id", "held-producer"); v == 0 {
		t.Fatal("kaas_quota_throttles_total shows no produce throttle")
	}
	if v := metric(t, b, "kaas_quota_limit", "quota", "fetch", "client_id", "held-consumer"); v != fetchQuota {
		t.Fatalf("kaas_quota_limit for the consumer %v, want %d", v, fetchQuota)
	}
}
