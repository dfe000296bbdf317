package chaos

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/model/loopback"
)

// Brokers in every run, and the lease they hold: short, so that a pause
// or a partition of a few seconds outlives it.
const (
	brokerCount = 3
	sessionTTL  = "2s"
)

var (
	brokerReady = regexp.MustCompile(`msg="listening on `)
	etcdReady   = regexp.MustCompile(`etcd serving on `)
)

// cluster is etcd and three brokers on one data directory, as child
// processes, each broker in a namespace of its own when net is set.
type cluster struct {
	bin, dir string
	net      *network // nil: everything on loopback, no partitions
	rec      *Recorder
	etcd     *proc
	etcdURL  string
	brokers  map[int]*member
	logs     clientLogs

	watching sync.WaitGroup
	closing  chan struct{}
}

type member struct {
	id   int
	addr string
	proc *proc
	// mu serialises the nemesis and the exit watcher on this broker.
	mu sync.Mutex
}

func startCluster(ctx context.Context, bin, dir string, nw *network, rec *Recorder) (c *cluster, err error) {
	c = &cluster{bin: bin, dir: dir, net: nw, rec: rec, brokers: map[int]*member{}, closing: make(chan struct{}),
		logs: clientLogs{dir: filepath.Join(dir, "clients")}}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	etcdListen, etcdPeer := c.addr(0, 2379), c.addr(0, 2380)
	c.etcdURL = "http://" + etcdListen
	c.etcd = &proc{name: "etcd", ready: etcdReady, logPath: filepath.Join(dir, "etcd.log"),
		argv: []string{bin, "etcd", "--listen", etcdListen, "--peer-listen", etcdPeer, "--data", filepath.Join(dir, "etcd"), "--log-level", "info"}}
	if err := c.etcd.startRetrying(ctx, 30*time.Second); err != nil {
		return c, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return c, err
	}
	for id := 1; id <= brokerCount; id++ {
		addr, admin := c.addr(id, 9092), c.addr(id, 9644)
		var argv []string
		if nw != nil {
			argv = nw.exec(id)
		}
		argv = append(argv, bin, "serve", "--cluster-etcd", c.etcdURL, "--cluster-name", "chaos",
			"--broker-id", strconv.Itoa(id), "--session-ttl", sessionTTL, "--fence-poll-interval", "200ms",
			"--listen", addr, "--admin", admin, "--data", data, "--txn-abort-interval", "1s",
			"--internal-topic-configs")
		m := &member{id: id, addr: addr, proc: &proc{name: fmt.Sprintf("broker-%d", id), argv: argv, ready: brokerReady,
			logPath: filepath.Join(dir, fmt.Sprintf("broker-%d.log", id))}}
		c.brokers[id] = m
		if err := m.proc.startRetrying(ctx, 30*time.Second); err != nil {
			return c, err
		}
		c.watch(m)
	}
	return c, nil
}

// addr is where process id (0: etcd) listens: its own address in a
// namespace, or a free loopback port below the ephemeral range (a killed
// process comes back at its address, which an outbound connection must
// not have taken meanwhile: loopback.Pick).
func (c *cluster) addr(id, port int) string {
	if c.net != nil {
		ip := c.net.etcdIP
		if id > 0 {
			ip = c.net.brokerIP[id]
		}
		return net.JoinHostPort(ip, strconv.Itoa(port))
	}
	addr, err := loopback.Pick()
	if err != nil {
		panic(err)
	}
	return addr
}

// watch restarts a broker that exits by itself, and records that it did.
func (c *cluster) watch(m *member) {
	c.watching.Add(1)
	go func() {
		defer c.watching.Done()
		for {
			run := m.proc.current()
			select {
			case <-c.closing:
				return
			case <-run.done:
			}
			if run.ready.Load() && !run.expected.Load() {
				m.mu.Lock()
				if m.proc.current() == run { // nobody started it again meanwhile
					c.rec.Note(Event{Process: m.proc.name, Type: Info, F: Exit, Note: "exited by itself", Err: fmt.Sprint(run.err)})
					_ = m.proc.startRetrying(context.Background(), 60*time.Second)
				}
				m.mu.Unlock()
			}
			// Wait for the next start (the nemesis's, after a kill).
			for m.proc.current() == run {
				select {
				case <-c.closing:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}()
}

func (c *cluster) seeds() []string {
	var out []string
	for id := 1; id <= brokerCount; id++ {
		out = append(out, c.brokers[id].addr)
	}
	return out
}

// clientOpts reach the cluster from the harness (from the clients'
// address when brokers have namespaces) with timeout as every client
// timeout: faults then end operations in errors, as they do for real
// clients with tight deadlines.
func (c *cluster) clientOpts(timeout time.Duration, logName string) []kgo.Opt {
	d := &net.Dialer{Timeout: timeout}
	if c.net != nil {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.net.clientIP)}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.seeds()...),
		kgo.Dialer(d.DialContext),
		kgo.RequestTimeoutOverhead(timeout),
		kgo.ProduceRequestTimeout(timeout),
		kgo.RetryTimeout(timeout),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}
	if logName != "" {
		opts = append(opts, kgo.WithLogger(c.logs.get(logName)))
	}
	return opts
}

func (c *cluster) admin(timeout time.Duration) (*kadm.Client, error) {
	cl, err := kgo.NewClient(c.clientOpts(timeout, "")...)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// healthy polls until Metadata lists every broker and every partition of
// topics has a live leader, or ctx ends.
func (c *cluster) healthy(ctx context.Context, topics map[string]int32) error {
	adm, err := c.admin(3 * time.Second)
	if err != nil {
		return err
	}
	defer adm.Close()
	var last error
	for {
		last = func() error {
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			md, err := adm.Metadata(mctx, slices.Sorted(maps.Keys(topics))...)
			if err != nil {
				return err
			}
			if len(md.Brokers) != brokerCount {
				return fmt.Errorf("%d brokers in metadata", len(md.Brokers))
			}
			live := map[int32]bool{}
			for _, b := range md.Brokers {
				live[b.NodeID] = true
			}
			for name, parts := range topics {
				td, ok := md.Topics[name]
				if !ok || td.Err != nil || int32(len(td.Partitions)) != parts {
					return fmt.Errorf("topic %s not ready: %v", name, td.Err)
				}
				for p, pd := range td.Partitions {
					if pd.Err != nil || !live[pd.Leader] {
						return fmt.Errorf("%s/%d has no live leader (%v)", name, p, pd.Err)
					}
				}
			}
			return nil
		}()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy: %w", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureUp heals every partition, continues every paused process and
// starts every dead one: the end of the faults.
func (c *cluster) ensureUp(ctx context.Context) error {
	if c.etcd.isStopped() {
		_ = c.etcd.signal(syscall.SIGCONT)
	}
	if !c.etcd.alive() {
		if err := c.etcd.startRetrying(ctx, 60*time.Second); err != nil {
			return err
		}
	}
	for id := 1; id <= brokerCount; id++ {
		m := c.brokers[id]
		if c.net != nil {
			_ = c.net.heal(id)
		}
		m.mu.Lock()
		if m.proc.isStopped() {
			_ = m.proc.signal(syscall.SIGCONT)
		}
		var err error
		if !m.proc.alive() {
			err = m.proc.startRetrying(ctx, 60*time.Second)
		}
		m.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// close kills every process.
func (c *cluster) close() {
	select {
	case <-c.closing:
	default:
		close(c.closing)
	}
	for _, m := range c.brokers {
		m.mu.Lock()
		m.proc.kill()
		m.mu.Unlock()
	}
	if c.etcd != nil {
		c.etcd.kill()
	}
	c.watching.Wait()
	c.logs.close()
}
