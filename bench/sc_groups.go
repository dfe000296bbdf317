package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

func init() {
	register(&Scenario{
		Name:     "offset-commit",
		About:    "--consumers group consumers (default 1), each in a group of its own, committing (synchronously) after each poll of up to 10 records",
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
				n := orDefault(o.Consumers, 10)
				return fmt.Sprintf("%d members, %d partitions, %v heartbeats, %v measured per side", n, max(o.Partitions, 2*n), o.GroupHeartbeat, o.Duration)
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

// commitAfterEachPoll runs --consumers consumers, each alone in a group of
// its own (so their commits spread over the coordinator's slots), each
// committing synchronously after every poll of up to 10 records. An op is
// one commit.
func commitAfterEachPoll(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-commit")
	if err := e.createTopic(ctx, topic, e.Opts.Partitions); err != nil {
		return err
	}
	n := orDefault(e.Opts.Consumers, 1)
	// Every consumer reads the whole topic: enough records that none
	// runs dry at ten per commit (kfake commits ~12k times/s here).
	total := fillCount(e.Opts.Duration, 200_000, 10_000, 4_000_000)
	if err := e.fill(ctx, topic, total, e.Opts.RecordSize); err != nil {
		return err
	}
	var consumers []*kgo.Client
	defer func() {
		for _, cl := range consumers {
			cl.Close()
		}
	}()
	for i := range n {
		cl, err := e.client(kgo.ConsumerGroup(fmt.Sprintf("%s-%d", uniqueTopic("bench-commit-group"), i)), kgo.ConsumeTopics(topic),
			kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(shortPoll))
		if err != nil {
			return err
		}
		consumers = append(consumers, cl)
	}
	// Join every group before measuring (kaas holds a new group's first
	// rebalance open for group.initial.rebalance.delay.ms).
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	var joins errgroup.Group
	for _, cl := range consumers {
		joins.Go(func() error {
			if err := cl.PollRecords(sctx, 1).Err0(); err != nil {
				return fmt.Errorf("joining the group: %w", err)
			}
			return nil
		})
	}
	if err := joins.Wait(); err != nil {
		return err
	}
	var dry atomic.Int32
	before, hand := readFsyncCounts(e), readHandoffs(e)
	e.Begin()
	var commits errgroup.Group
	for _, cl := range consumers {
		commits.Go(func() error {
			for e.Running() {
				// A poll that finds nothing for a while means the
				// pre-filled records ran out: stop rather than block
				// until the side's deadline.
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				fs := cl.PollRecords(pctx, 10)
				cancel()
				if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				var n, bytes int64
				fs.EachRecord(func(r *kgo.Record) { n++; bytes += int64(len(r.Value)) })
				if n == 0 {
					dry.Add(1)
					return nil
				}
				start := time.Now()
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					return fmt.Errorf("commit: %w", err)
				}
				e.Rec.Op(n, bytes, time.Since(start))
			}
			return nil
		})
	}
	err := commits.Wait()
	handoffsPerOpNote(e, hand, "commit")
	schedNote(e)
	e.EndMeasuring() // the notes read the broker's metrics
	serverLatencyNote(e, "OffsetCommit")
	fsyncsPerOpNote(e, before, "commit")
	fsyncLatencyNote(e, before)
	if d := dry.Load(); d > 0 {
		e.Note("%d of %d consumers ran out of pre-filled records before the end", d, n)
	}
	return err
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
	size := orDefault(e.Opts.Consumers, 10)
	parts := max(e.Opts.Partitions, 2*size)
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
	for range size - 1 {
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
