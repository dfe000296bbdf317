package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"kaas/broker"
)

// childEnv names the broker a re-executed bench process should run
// (kaas or kfake) instead of doing what its arguments say.
const childEnv = "KAAS_BENCH_CHILD"

// MaybeRunChild runs a broker child process for the rss scenario (or a
// cluster scenario's broker) and exits, when this process was started as
// one; otherwise it returns at once. Call it first thing in main (and in
// TestMain of tests that run those scenarios).
//
// The child prints "ADDR host:port" on stdout once clients can connect
// (kind kaas-admin: then "ADMIN host:port DATA dir"), and stops when its
// stdin closes.
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
	var addr, extra string
	var stop func()
	switch kind {
	case "kaas", "kaas-admin", "kaas-cluster":
		var b *broker.Broker
		var err error
		if kind != "kaas-cluster" {
			dir, derr := os.MkdirTemp("", "kaas-bench-rss-")
			if derr != nil {
				return derr
			}
			defer os.RemoveAll(dir)
			cfg := broker.DefaultConfig()
			cfg.Listen, cfg.AdminAddr, cfg.DataDir = "127.0.0.1:0", "", dir
			if kind == "kaas-admin" { // its /metrics and inspector are read
				cfg.AdminAddr = "127.0.0.1:0"
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
			if n := shareLocksFromEnv(); n > 0 {
				cfg.SharePartitionMaxRecordLocks = n
			}
			b, err = broker.Start(cfg)
			if err == nil && kind == "kaas-admin" {
				extra = fmt.Sprintf("ADMIN %s DATA %s\n", b.AdminAddr(), dir)
			}
		} else {
			b, err = startClusterChild(os.Getenv(childConfigEnv))
		}
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
		opts := []kfake.Opt{kfake.NumBrokers(1)}
		if n := shareLocksFromEnv(); n > 0 {
			opts = append(opts, kfake.BrokerConfigs(map[string]string{"group.share.partition.max.record.locks": fmt.Sprint(n)}))
		}
		c, err := kfake.NewCluster(opts...)
		if err != nil {
			return err
		}
		addr, stop = c.ListenAddrs()[0], c.Close
	default:
		return fmt.Errorf("unknown child kind %q", kind)
	}
	fmt.Fprintf(stdout, "ADDR %s\n%s", addr, extra)
	_, _ = io.Copy(io.Discard, bufio.NewReader(stdin)) // until the parent closes it
	stop()
	return nil
}

// startClusterChild starts the cluster broker a JSON clusterChildConfig
// describes, logging at info level to its log file.
func startClusterChild(js string) (*broker.Broker, error) {
	var cc clusterChildConfig
	if err := json.Unmarshal([]byte(js), &cc); err != nil {
		return nil, fmt.Errorf("cluster child config: %w", err)
	}
	logf, err := os.OpenFile(cc.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cfg := broker.DefaultConfig()
	cfg.Listen, cfg.AdminAddr, cfg.DataDir = cc.Listen, "", cc.Data
	cfg.ClusterEtcd, cfg.ClusterName, cfg.BrokerID = []string{cc.Etcd}, cc.Cluster, cc.ID
	cfg.SessionTTL, cfg.FencePollInterval, cfg.FlushInterval = cc.TTL, cc.FencePoll, cc.FlushInterval
	cfg.DefaultPartitions = cc.Partitions
	cfg.Logger = slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return broker.Start(cfg)
}

// startChild re-runs this executable as a broker child with env added:
// its stdin (closing it stops the child) and stdout (its ADDR line).
func startChild(env ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	return cmd, stdin, stdout, cmd.Start()
}

// startBrokerChild starts e.Side's broker as a child process (env added),
// points e at the address it reports and returns its pid and how to stop
// it: the scenarios that measure a process (rss, share-rss) need one.
func startBrokerChild(e *Env, env ...string) (pid int, stop func(), err error) {
	cmd, stdin, stdout, err := startChild(append([]string{childEnv + "=" + e.Side}, env...)...)
	if err != nil {
		return 0, nil, fmt.Errorf("starting the %s child: %w", e.Side, err)
	}
	stop = func() {
		stdin.Close()
		_ = cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		stop()
		return 0, nil, fmt.Errorf("the %s child did not report its address (%q): %v", e.Side, line, err)
	}
	e.Target = &Target{Side: e.Side, Addrs: []string{addr}}
	return cmd.Process.Pid, stop, nil
}

// procMiB reads a kB field (VmRSS:, VmHWM:) of a process's status.
func procMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %s %q: %w", field, rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
