package bench

// The cluster scenarios' harness: an embedded etcd in this process and
// kaas brokers as real child processes (this executable re-run as a
// broker, see child.go) sharing one temporary data directory, so a
// broker can be SIGKILLed as in production. Each child is a broker of
// the cluster on a fixed loopback port (cluster brokers register the
// address they listen on, so it is chosen before they start, and a
// restarted broker gets it back).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/coord/etcdembed"
	"kaas/model/loopback"
)

// clusterChildConfig is what a cluster broker child runs with (passed as
// JSON in childConfigEnv).
type clusterChildConfig struct {
	Listen        string        `json:"listen"`
	Data          string        `json:"data"`
	Etcd          string        `json:"etcd"`
	Cluster       string        `json:"cluster"`
	ID            int32         `json:"id"`
	TTL           time.Duration `json:"ttl"`
	FencePoll     time.Duration `json:"fence_poll"`
	FlushInterval time.Duration `json:"flush_interval"`
	Partitions    int32         `json:"partitions"`
	LogFile       string        `json:"log_file"`
}

const childConfigEnv = "KAAS_BENCH_CHILD_CONFIG"

// benchCluster is etcd plus the broker children.
type benchCluster struct {
	o       *Options
	etcd    *etcdembed.Server
	dir     string
	name    string
	members map[int32]*clusterChild
}

// clusterChild is one broker process.
type clusterChild struct {
	cfg    clusterChildConfig
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
}

// startBenchCluster starts etcd and brokers 1..n, and returns once each
// listens.
func startBenchCluster(ctx context.Context, o *Options, n int) (*benchCluster, error) {
	dir, err := os.MkdirTemp(o.TempDir, "kaas-bench-cluster-")
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := etcdembed.Start(etcdembed.Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "etcd"), Logger: quiet})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &benchCluster{o: o, etcd: e, dir: dir, name: fmt.Sprintf("bench%d", time.Now().UnixNano()%1e6), members: map[int32]*clusterChild{}}
	for id := int32(1); id <= int32(n); id++ {
		addr, err := loopback.Pick() // a failover restarts a broker at its address
		if err == nil {
			err = c.start(ctx, id, addr)
		}
		if err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// start runs broker id on addr and waits until it listens.
func (c *benchCluster) start(ctx context.Context, id int32, addr string) error {
	cfg := clusterChildConfig{
		Listen: addr, Data: filepath.Join(c.dir, "data"), Etcd: c.etcd.Endpoint(), Cluster: c.name, ID: id,
		TTL: c.o.SessionTTL, FencePoll: c.o.FencePoll, FlushInterval: c.o.FlushInterval,
		Partitions: int32(c.o.Partitions), LogFile: filepath.Join(c.dir, fmt.Sprintf("broker-%d.log", id)),
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cmd, stdin, stdout, err := startChild(childEnv+"=kaas-cluster", childConfigEnv+"="+string(js))
	if err != nil {
		return fmt.Errorf("starting broker %d: %w", id, err)
	}
	ch := &clusterChild{cfg: cfg, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	c.members[id] = ch
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(ch.exited)
	}()
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "ADDR ") {
			return fmt.Errorf("broker %d did not start (%q); its log is %s", id, strings.TrimSpace(line), cfg.LogFile)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill SIGKILLs broker id and returns once the process is gone.
func (c *benchCluster) kill(id int32) {
	ch := c.members[id]
	_ = ch.cmd.Process.Kill()
	<-ch.exited
}

// restart starts a killed broker again on its address.
func (c *benchCluster) restart(ctx context.Context, id int32) error {
	return c.start(ctx, id, c.members[id].cfg.Listen)
}

// addrs lists the brokers' addresses by id.
func (c *benchCluster) addrs() []string {
	ids := make([]int, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, c.members[int32(id)].cfg.Listen)
	}
	return out
}

func (c *benchCluster) target(side string) *Target {
	return &Target{Side: side, Addrs: c.addrs(), ClientOpts: []kgo.Opt{kgo.RetryTimeout(c.o.SetupTimeout)}}
}

// childrenCPU is the CPU time the live broker processes have used.
func (c *benchCluster) childrenCPU() time.Duration {
	var total time.Duration
	for _, ch := range c.members {
		select {
		case <-ch.exited:
			continue
		default:
		}
		total += procCPU(ch.cmd.Process.Pid)
	}
	return total
}

// procCPU reads a process's user + system time from /proc (0 if it
// cannot).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// close stops every broker (stdin closed: a graceful close), then etcd,
// and removes the data.
func (c *benchCluster) close() {
	for _, ch := range c.members {
		_ = ch.stdin.Close()
	}
	for _, ch := range c.members {
		select {
		case <-ch.exited:
		case <-time.After(30 * time.Second):
			_ = ch.cmd.Process.Kill()
			<-ch.exited
		}
	}
	c.etcd.Close()
	// KAAS_BENCH_KEEP=1 keeps the brokers' logs (and data) for a look at
	// where a failover's time went.
	if os.Getenv("KAAS_BENCH_KEEP") != "" {
		fmt.Fprintln(os.Stderr, "kept", c.dir)
		return
	}
	os.RemoveAll(c.dir)
}

// onCluster starts a cluster of n brokers for a scenario, creates a topic
// of --partitions partitions on it and returns a client; the caller closes
// the client and the cluster.
func (e *Env) onCluster(ctx context.Context, n int, prefix string) (*benchCluster, string, *kgo.Client, error) {
	c, err := startBenchCluster(ctx, e.Opts, n)
	if err != nil {
		return nil, "", nil, err
	}
	e.Target = c.target(e.Side)
	topic := uniqueTopic(prefix)
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	if err := e.createTopic(sctx, topic, e.Opts.Partitions); err != nil {
		c.close()
		return nil, "", nil, err
	}
	cl, err := e.client()
	if err != nil {
		c.close()
		return nil, "", nil, err
	}
	return c, topic, cl, nil
}

// waitFor polls cond every interval until it holds (nil), fails, or d
// has passed (an error naming what was awaited).
func waitFor(ctx context.Context, d, every time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, d)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
}
