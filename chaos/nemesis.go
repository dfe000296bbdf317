package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// fault is one step of the nemesis's schedule: at At (since the run
// started), do Kind to Target (a broker id; 0 is etcd) for Hold, then
// heal.
type fault struct {
	At     time.Duration
	Kind   string
	Target int
	Hold   time.Duration
}

func (f fault) String() string {
	target := "etcd"
	if f.Target > 0 {
		target = fmt.Sprintf("broker %d", f.Target)
	}
	return fmt.Sprintf("%s %s for %v at %v", f.Kind, target, f.Hold.Round(time.Millisecond), f.At.Round(time.Millisecond))
}

// The kinds, with how often each is drawn and how long it holds.
var faultKinds = []struct {
	kind       string
	weight     int
	etcd       bool // targets etcd rather than a broker
	partition  bool // needs network namespaces
	minH, maxH time.Duration
}{
	{"kill-broker", 2, false, false, 500 * time.Millisecond, 3 * time.Second},
	// Up to 2.5 TTLs: a broker paused past its lease wakes up deposed.
	{"pause-broker", 3, false, false, time.Second, 5 * time.Second},
	{"kill-etcd", 1, true, false, time.Second, 4 * time.Second},
	{"pause-etcd", 1, true, false, time.Second, 5 * time.Second},
	// A broker cut from etcd keeps its clients and peers: its lease
	// expires and a peer takes its units over while it still hears clients.
	{"isolate-etcd", 3, false, true, 3 * time.Second, 8 * time.Second},
	// Cut from etcd and from its peers (markers, verification, fences).
	{"isolate", 3, false, true, 3 * time.Second, 8 * time.Second},
}

// schedule is the nemesis's whole plan for a run, drawn from seed alone:
// the same seed gives the same faults in the same order.
func schedule(seed uint64, d time.Duration, partitions bool) []fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973)) // "nemesis"
	total := 0
	for _, k := range faultKinds {
		if partitions || !k.partition {
			total += k.weight
		}
	}
	var out []fault
	at := 3 * time.Second // the workloads warm up first
	for {
		pick := rng.IntN(total)
		for _, k := range faultKinds {
			if !partitions && k.partition {
				continue
			}
			if pick -= k.weight; pick >= 0 {
				continue
			}
			f := fault{At: at, Kind: k.kind, Hold: k.minH + time.Duration(rng.Int64N(int64(k.maxH-k.minH)))}
			if !k.etcd {
				f.Target = 1 + rng.IntN(brokerCount)
			}
			if f.At+f.Hold > d {
				return out
			}
			out = append(out, f)
			at += f.Hold + time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
			break
		}
	}
}

// nemesis runs a schedule against the cluster, recording each fault in
// the history, and heals the fault in progress when ctx ends.
func (c *cluster) nemesis(ctx context.Context, start time.Time, plan []fault, logf func(string, ...any)) {
	for _, f := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.At))):
		}
		id := c.rec.Invoke(Event{Process: "nemesis", F: Fault, Value: f.Kind, Note: f.String()})
		heal, err := c.inject(f)
		if err != nil {
			logf("nemesis: %s: %v", f, err)
			c.rec.Complete(id, Info, Event{Process: "nemesis", F: Fault, Value: f.Kind, Err: err.Error()})
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.Hold):
		}
		if err := heal(); err != nil {
			logf("nemesis: healing %s: %v", f, err)
			c.rec.Complete(id, Info, Event{Process: "nemesis", F: Fault, Value: f.Kind, Err: err.Error()})
			continue
		}
		c.rec.Complete(id, OK, Event{Process: "nemesis", F: Fault, Value: f.Kind})
	}
}

// inject starts fault f and returns what heals it.
func (c *cluster) inject(f fault) (heal func() error, err error) {
	restartCtx := context.Background()
	switch f.Kind {
	case "kill-etcd":
		c.etcd.kill()
		return func() error { return c.etcd.startRetrying(restartCtx, 60*time.Second) }, nil
	case "pause-etcd":
		if err := c.etcd.signal(syscall.SIGSTOP); err != nil {
			return nil, err
		}
		return func() error { return c.etcd.signal(syscall.SIGCONT) }, nil
	}
	m := c.brokers[f.Target]
	switch f.Kind {
	case "kill-broker":
		m.mu.Lock()
		m.proc.kill()
		m.mu.Unlock()
		return func() error {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.proc.startRetrying(restartCtx, 60*time.Second)
		}, nil
	case "pause-broker":
		if err := m.proc.signal(syscall.SIGSTOP); err != nil {
			return nil, err
		}
		return func() error { return m.proc.signal(syscall.SIGCONT) }, nil
	case "isolate-etcd", "isolate":
		if c.net == nil {
			return nil, fmt.Errorf("no network namespaces: cannot partition")
		}
		cut := []string{c.net.etcdIP}
		if f.Kind == "isolate" {
			for id, ip := range c.net.brokerIP {
				if id != f.Target {
					cut = append(cut, ip)
				}
			}
		}
		if err := c.net.cut(f.Target, cut...); err != nil {
			_ = c.net.heal(f.Target)
			return nil, err
		}
		return func() error { return c.net.heal(f.Target) }, nil
	}
	return nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}
