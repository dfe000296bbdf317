package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"kaas/coord/etcdembed"
)

const etcdUsage = `Usage: kaas etcd [flags]

Runs a single-node etcd inside kaas, for development, make cluster and
tests: brokers started with --cluster-etcd http://LISTEN coordinate
through it. Production runs a real etcd cluster (deploy/kubernetes).
Runs until SIGINT or SIGTERM. The first log line once it serves clients
is "etcd serving on URL".

Flags:
`

func runEtcd(args []string) error {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), etcdUsage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:2379", "client `host:port` (port 0 picks a free one)")
	peer := fs.String("peer-listen", "", "raft peer `host:port` (default: a free loopback port; a single node never dials it)")
	data := fs.String("data", "./data-etcd", "etcd data `directory`")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err, true}
	}
	if fs.NArg() > 0 {
		return usageError{error: fmt.Errorf("etcd takes no arguments, got %q", fs.Args())}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(*logLevel))); err != nil {
		return usageError{error: fmt.Errorf("--log-level: %w", err)}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	s, err := etcdembed.Start(etcdembed.Config{Listen: *listen, PeerListen: *peer, DataDir: *data, Logger: logger})
	if err != nil {
		return err
	}
	logger.Info("etcd serving on "+s.Endpoint(), "data", *data)
	select {
	case sig := <-sigs:
		logger.Info("stopping etcd", "signal", sig.String())
	case err := <-s.Err():
		s.Close()
		return fmt.Errorf("etcd: %w", err)
	}
	s.Close()
	return nil
}
