package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register(&Scenario{
		Name:     "offset-commit",
		About:    "one group consumer committing (synchronously) after each poll of up to 10 records",
		Headline: "commits", Latency: "commit",
		Run: commitAfterEachPoll,
	})
	for _, p := range joinProtocols {
		register(&Scenario{
			Name: p.scenario,
			About: "a member joins a group of --consumers - 1 (" + p.about + "): time from its first request until every member " +
				"holds its share of the partitions, none twice (the member then leaves and the group settles, unmeasured)",
			Headline: "joins", Latency: "join",
			Params: func(o *Options) string {
				return fmt.Sprintf("%d members, %d partitions, %v heartbeats, %v measured per side", o.Consumers, max(o.Partitions, 2*o.Consumers), o.GroupHeartbeat, o.Duration)
			},
			Run: func(ctx context.Context, e *Env) error { return groupJoin(ctx, e, p) },
		})
	}
}

// joinProtocol is one way of running a group in the group-join scenarios.
type joinProtocol struct {
	scenario, about string
	opts            func(o *Options) []kgo.Opt
}

// joinProtocols: the classic protocol with an eager assignor (everyone
// revokes everything, then all rejoin), with cooperative-sticky (only
// moved partitions are revoked, over two rebalances), and KIP-848 (the
// broker assigns; members reconcile through heartbeats, at the interval
// the broker gives: both brokers are told --group-heartbeat, as the
// classic members heartbeat at it).
var joinProtocols = []joinProtocol{
	{"group-join", "classic protocol, eager range assignor", func(o *Options) []kgo.Opt {
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer()), kgo.HeartbeatInterval(o.GroupHeartbeat)}
	}},
	{"group-join-cooperative", "classic protocol, cooperative-sticky assignor", func(o *Options) []kgo.Opt {
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(o.GroupHeartbeat)}
	}},
	{"group-join-848", "KIP-848 consumer protocol, the broker's uniform assignor", func(*Options) []kgo.Opt {
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	}},
}

func commitAfterEachPoll(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-commit")
	if err := e.createTopic(ctx, topic, e.Opts.Partitions); err != nil {
		return err
	}
	total := fillCount(e.Opts.Duration, 100_000, 10_000, 2_000_000)
	if err := e.fill(ctx, topic, total, e.Opts.RecordSize); err != nil {
		return err
	}
	cl, err := e.client(kgo.ConsumerGroup(uniqueTopic("bench-commit-group")), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(shortPoll))
	if err != nil {
		return err
	}
	defer cl.Close()
	poll := func() (int64, int64, error) {
		fs := cl.PollRecords(ctx, 10)
		if err := fs.Err0(); err != nil {
			return 0, 0, err
		}
		var n, bytes int64
		fs.EachRecord(func(r *kgo.Record) { n++; bytes += int64(len(r.Value)) })
		return n, bytes, nil
	}
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	fs := cl.PollRecords(sctx, 1) // join the group
	if err := fs.Err0(); err != nil {
		return fmt.Errorf("joining the group: %w", err)
	}
	e.Begin()
	for e.Running() {
		n, bytes, err := poll()
		if err != nil {
			return err
		}
		if n == 0 {
			e.Note("ran out of pre-filled records before the end")
			return nil
		}
		start := time.Now()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		e.Rec.Op(n, bytes, time.Since(start))
	}
	return nil
}

// member is one consumer of the group-join scenarios and the partitions it
// holds, by its rebalance callbacks.
type member struct {
	cl      *kgo.Client
	mu      sync.Mutex
	changed time.Time // when its partitions last changed
	parts   map[int32]bool
}

func (m *member) state() (time.Time, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed, len(m.parts)
}

func (m *member) update(topic string, ps map[string][]int32, add bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range ps[topic] {
		if add {
			m.parts[p] = true
		} else {
			delete(m.parts, p)
		}
	}
	m.changed = time.Now()
}

func groupJoin(ctx context.Context, e *Env, proto joinProtocol) error {
	topic := uniqueTopic("bench-join")
	parts := max(e.Opts.Partitions, 2*e.Opts.Consumers)
	if err := e.createTopic(ctx, topic, parts); err != nil {
		return err
	}
	group := uniqueTopic("bench-join-group")
	join := func() (*member, error) {
		m := &member{parts: map[int32]bool{}}
		opts := append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(shortPoll),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { m.update(topic, a, true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.update(topic, r, false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) { m.update(topic, l, false) }),
		}, proto.opts(e.Opts)...)
		cl, err := e.client(opts...)
		m.cl = cl
		return m, err
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.cl.Close()
		}
	}()
	// settled waits until the members hold every partition between them,
	// each its share (the floor or the ceiling of partitions/members),
	// and returns when the last holding changed.
	settled := func(ctx context.Context) (time.Time, error) {
		lo := parts / len(members)
		hi := lo
		if parts%len(members) != 0 {
			hi++
		}
		for {
			last, held := time.Time{}, 0
			ok := true
			for _, m := range members {
				at, n := m.state()
				if n < lo || n > hi {
					ok = false
					break
				}
				if at.After(last) {
					last = at
				}
				held += n
			}
			if ok && held == parts {
				return last, nil
			}
			select {
			case <-ctx.Done():
				return time.Time{}, fmt.Errorf("waiting for the group to settle with %d members: %w", len(members), ctx.Err())
			case <-time.After(time.Millisecond):
			}
		}
	}
	for range e.Opts.Consumers - 1 {
		m, err := join()
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	if _, err := settled(sctx); err != nil {
		return err
	}
	e.Begin()
	for e.Running() {
		t0 := time.Now()
		m, err := join()
		if err != nil {
			return err
		}
		members = append(members, m)
		done, err := settled(ctx)
		if err != nil {
			return err
		}
		e.Rec.Op(0, 0, done.Sub(t0))
		// The newcomer leaves; wait for the rest to settle again.
		members = members[:len(members)-1]
		m.cl.Close()
		if _, err := settled(ctx); err != nil {
			return err
		}
	}
	return nil
}
