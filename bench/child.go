package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kaas/broker"
)

// childEnv names the broker a re-executed bench process should run
// (kaas or kfake) instead of doing what its arguments say.
const childEnv = "KAAS_BENCH_CHILD"

// MaybeRunChild runs a broker child process for the rss scenario and
// exits, when this process was started as one; otherwise it returns at
// once. Call it first thing in main (and in TestMain of tests that run
// the rss scenario).
//
// The child prints "ADDR host:port" on stdout once clients can connect,
// and stops when its stdin closes.
func MaybeRunChild() {
	kind := os.Getenv(childEnv)
	if kind == "" {
		return
	}
	if err := runChild(kind, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(kind string, stdin io.Reader, stdout io.Writer) error {
	var addr string
	var stop func()
	switch kind {
	case "kaas":
		dir, err := os.MkdirTemp("", "kaas-bench-rss-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg := broker.DefaultConfig()
		cfg.Listen, cfg.AdminAddr, cfg.DataDir = "127.0.0.1:0", "", dir
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
		b, err := broker.Start(cfg)
		if err != nil {
			return err
		}
		addr = b.Addr()
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = b.Close(ctx)
		}
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return err
		}
		addr, stop = c.ListenAddrs()[0], c.Close
	default:
		return fmt.Errorf("unknown child kind %q", kind)
	}
	fmt.Fprintf(stdout, "ADDR %s\n", addr)
	_, _ = io.Copy(io.Discard, bufio.NewReader(stdin)) // until the parent closes it
	stop()
	return nil
}
