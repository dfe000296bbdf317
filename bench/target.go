package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/metrics"
)

// Target is a running broker one side of a scenario talks to.
type Target struct {
	Side  string
	Addrs []string
	// ClientOpts reach the broker (TLS, SASL) for the secured sides.
	ClientOpts []kgo.Opt
	// Metrics is the broker's registry when kaas runs in this process
	// (scenarios read broker-side histograms from it); nil otherwise.
	Metrics *metrics.Metrics
	close   func()
}

// Close stops the broker if this process started it.
func (t *Target) Close() {
	if t.close != nil {
		t.close()
	}
}

// startTarget starts the broker for side: kaas in this process on a
// temporary data directory (or the --brokers address), or kfake.
func startTarget(side string, o *Options) (*Target, error) {
	switch side {
	case "kaas":
		if o.Brokers != "" {
			return &Target{Side: "kaas@" + o.Brokers, Addrs: strings.Split(o.Brokers, ",")}, nil
		}
		return startKaas(o)
	case sideQuota:
		t, err := startKaas(o)
		if err == nil {
			t.Side = side
		}
		return t, err
	case sidePlain, sideTLS, sideSASLSSL:
		return startSecureKaas(side, o)
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(o.Partitions),
			kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": strconv.FormatInt(o.GroupHeartbeat.Milliseconds(), 10)}))
		if err != nil {
			return nil, fmt.Errorf("starting kfake: %w", err)
		}
		return &Target{Side: "kfake", Addrs: c.ListenAddrs(), close: c.Close}, nil
	}
	return nil, fmt.Errorf("unknown side %q", side)
}

func startKaas(o *Options) (*Target, error) {
	dir, err := os.MkdirTemp(o.TempDir, "kaas-bench-")
	if err != nil {
		return nil, err
	}
	return startKaasWith(kaasBenchConfig(o, dir), o, dir)
}

// kaasBenchConfig is the broker every kaas side runs: a PLAINTEXT port,
// data in dir, no admin listener.
func kaasBenchConfig(o *Options, dir string) broker.Config {
	cfg := broker.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminAddr = ""
	cfg.DataDir = dir
	cfg.DefaultPartitions = int32(o.Partitions)
	cfg.FlushInterval = o.FlushInterval
	cfg.ConsumerHeartbeatInterval = o.GroupHeartbeat
	cfg.Logger = o.logger()
	return cfg
}

// startKaasWith starts kaas with cfg; dir is removed when it stops.
func startKaasWith(cfg broker.Config, o *Options, dir string) (*Target, error) {
	b, err := broker.Start(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kaas: %w", err)
	}
	return &Target{Side: "kaas", Addrs: []string{b.Addr()}, Metrics: b.Metrics(), close: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			o.logger().Error("closing kaas", "err", err)
		}
		os.RemoveAll(dir)
	}}, nil
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
