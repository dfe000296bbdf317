// Package brokertest starts real kaas brokers for tests: in process on an
// ephemeral port with a temporary data directory, or as a `kaas serve`
// subprocess (see binary.go), plus franz-go clients that are closed when
// the test ends. Every end-to-end test in the repository (core, groups,
// transactions) builds on these helpers so that all of them talk to the
// broker through the real wire path.
package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
)

// Option adjusts the broker configuration before Start.
type Option func(*broker.Config)

// WithConfig applies fn to the configuration (any field).
func WithConfig(fn func(*broker.Config)) Option { return Option(fn) }

// Config is the configuration Start uses: an ephemeral port on 127.0.0.1,
// dataDir, no admin listener, internal topic configs allowed, and the
// test log capture.
func Config(t testing.TB, dataDir string, opts ...Option) broker.Config {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dataDir
	cfg.AdminAddr = ""
	cfg.Logger = Logger(t)
	// Tests may use internal.segment.bytes for segments below the 1 MiB
	// floor, as Apache's tests do.
	cfg.InternalTopicConfigs = true
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// Start runs a broker on a fresh temporary data directory and closes it
// when the test ends.
func Start(t testing.TB, opts ...Option) *broker.Broker {
	t.Helper()
	return StartIn(t, t.TempDir(), opts...)
}

// StartIn runs a broker on dataDir (restart tests reuse a directory) and
// closes it when the test ends. Closing it earlier with Stop is fine.
func StartIn(t testing.TB, dataDir string, opts ...Option) *broker.Broker {
	t.Helper()
	b, err := broker.Start(Config(t, dataDir, opts...))
	if err != nil {
		t.Fatalf("starting broker on %s: %v", dataDir, err)
	}
	t.Cleanup(func() { Stop(t, b) })
	return b
}

// Stop closes a broker, failing the test if it cannot finish in time.
// Stopping twice is harmless.
func Stop(t testing.TB, b *broker.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		t.Errorf("closing broker: %v", err)
	}
}

// Client is a franz-go client seeded with addr, closed when the test ends.
// It fails fast on a broker that does not answer, so a test never hangs on
// a dead broker for franz-go's default timeouts.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.RequestRetries(5),
		kgo.RetryTimeout(20 * time.Second),
		kgo.RecordDeliveryTimeout(60 * time.Second),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin is a kadm client on its own franz-go client, closed when the test
// ends.
func Admin(t testing.TB, addr string, opts ...kgo.Opt) *kadm.Client {
	t.Helper()
	return kadm.NewClient(Client(t, addr, opts...))
}

// Context is a context for one test step, cancelled when the test ends or
// after d.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CreateTopic creates a topic with partitions partitions and the given
// configs (name=value pairs) and fails the test otherwise.
func CreateTopic(t testing.TB, addr, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := Admin(t, addr)
	resp, err := adm.CreateTopic(Context(t, 30*time.Second), partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
}

// Eventually polls cond every few milliseconds until it is true or d has
// passed, then fails the test with what.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
