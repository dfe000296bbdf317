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
	register(&Scenario{
		Name: "group-join",
		About: "a member joins a group of --consumers - 1: time until every member holds its new assignment " +
			"(eager range assignor, 100 ms heartbeats; the member then leaves and the group settles, unmeasured)",
		Headline: "joins", Latency: "join",
		Params: func(o *Options) string {
			return fmt.Sprintf("%d members, %d partitions, %v measured per side", o.Consumers, max(o.Partitions, 2*o.Consumers), o.Duration)
		},
		Run: groupJoin,
	})
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

// member is one consumer of the group-join scenario and what it was last
// assigned.
type member struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned time.Time // when it last received an assignment
	parts    int       // partitions it holds
}

func (m *member) state() (time.Time, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.assigned, m.parts
}

func groupJoin(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-join")
	parts := max(e.Opts.Partitions, 2*e.Opts.Consumers)
	if err := e.createTopic(ctx, topic, parts); err != nil {
		return err
	}
	group := uniqueTopic("bench-join-group")
	join := func() (*member, error) {
		m := &member{}
		cl, err := e.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.RangeBalancer()), kgo.HeartbeatInterval(100*time.Millisecond), kgo.FetchMaxWait(shortPoll),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				m.assigned, m.parts = time.Now(), len(a[topic])
				m.mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) {
				m.mu.Lock()
				m.parts = 0
				m.mu.Unlock()
			}))
		m.cl = cl
		return m, err
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.cl.Close()
		}
	}()
	// settled waits until every member got an assignment after since and
	// together they hold every partition.
	settled := func(ctx context.Context, since time.Time) (time.Time, error) {
		for {
			last, held := time.Time{}, 0
			ok := true
			for _, m := range members {
				at, n := m.state()
				if !at.After(since) {
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
	start := time.Now()
	for range e.Opts.Consumers - 1 {
		m, err := join()
		if err != nil {
			return err
		}
		members = append(members, m)
	}
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	if _, err := settled(sctx, start); err != nil {
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
		done, err := settled(ctx, t0)
		if err != nil {
			return err
		}
		e.Rec.Op(0, 0, done.Sub(t0))
		// The newcomer leaves; wait for the rest to settle again.
		members = members[:len(members)-1]
		left := time.Now()
		m.cl.Close()
		if _, err := settled(ctx, left); err != nil {
			return err
		}
	}
	return nil
}
