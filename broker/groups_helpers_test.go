package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/state/consumergroup"
)

// startGroupBroker starts a broker on 127.0.0.1:0 over dir with group
// timings small enough for tests, and stops it when the test ends.
// KAAS_TEST_LOG=1 shows its log.
func startGroupBroker(t *testing.T, dir string, mutate func(*Config)) *Broker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.AdminAddr = ""
	cfg.GroupInitialRebalanceDelay = 50 * time.Millisecond
	cfg.GroupMinSessionTimeout = 100 * time.Millisecond
	cfg.Logger = slog.New(slog.DiscardHandler)
	if os.Getenv("KAAS_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := Start(cfg)
	if err != nil {
		t.Fatalf("starting broker: %v", err)
	}
	t.Cleanup(func() { closeBroker(t, b) })
	return b
}

func closeBroker(t *testing.T, b *Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Errorf("closing broker: %v", err)
	}
}

func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func createGroupTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}
}

func produce(t *testing.T, addr, topic string, partition int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte(fmt.Sprintf("%s-%d-%d", topic, partition, i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last state: %s", what, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// member is a franz-go group consumer that polls in the background and
// tracks its current assignment through the rebalance callbacks.
type member struct {
	name string
	cl   *kgo.Client
	done chan struct{}

	mu       sync.Mutex
	assigned map[int32]bool
	records  []*kgo.Record
}

func startMember(t *testing.T, addr, group, topic, name string, opts ...kgo.Opt) *member {
	t.Helper()
	m := &member{name: name, assigned: map[int32]bool{}, done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.SessionTimeout(3 * time.Second),
		kgo.RebalanceTimeout(5 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range a[topic] {
				m.assigned[p] = true
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range r[topic] {
				delete(m.assigned, p)
			}
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			m.mu.Lock()
			m.records = append(m.records, fs.Records()...)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close leaves the group (franz-go sends LeaveGroup on Close) and waits
// for the poll loop to end. Safe to call twice.
func (m *member) close() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cl.Close()
	<-m.done
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.assigned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *member) consumed() []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*kgo.Record(nil), m.records...)
}

// balanced reports whether members hold every one of n partitions exactly
// once, each with n/len or n/len+1 of them.
func balanced(n int32, members ...*member) (bool, string) {
	seen := map[int32]string{}
	var desc []string
	ok := true
	for _, m := range members {
		ps := m.partitions()
		desc = append(desc, fmt.Sprintf("%s=%v", m.name, ps))
		lo := int(n) / len(members)
		if len(ps) < lo || len(ps) > lo+1 {
			ok = false
		}
		for _, p := range ps {
			if other, dup := seen[p]; dup {
				ok = false
				desc = append(desc, fmt.Sprintf("p%d also on %s", p, other))
			}
			seen[p] = m.name
		}
	}
	if int32(len(seen)) != n {
		ok = false
	}
	return ok, strings.Join(desc, " ")
}

type groupsSummary = consumergroup.Summary

// groupGauge is kaas_groups{type, state}.
func groupGauge(b *Broker, typ, state string) float64 {
	return testutil.ToFloat64(b.Metrics().Groups.WithLabelValues(typ, state))
}
