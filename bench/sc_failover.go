package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/state/ownership"
	"kaas/storage/partlog/batchtest"
)

func init() {
	register(&Scenario{
		Name: "failover",
		About: "SIGKILL of a partition's owner in a cluster of 3 broker processes → first produce to that partition " +
			"acknowledged by another broker (goal p99 ≤ --session-ttl + 1 s); kills go round the brokers, " +
			"each restarted and given its share back before the next",
		Headline: "kills", Latency: "takeover",
		Sides:    []string{"kaas"},
		NoTarget: true,
		Params: func(o *Options) string {
			return fmt.Sprintf("3 brokers, session TTL %v, %d partitions, kills until %v have passed (at least one)", o.SessionTTL, o.Partitions, o.Duration)
		},
		Run: failover,
	})
}

// failover times what a SIGKILL costs a partition's writers. Per kill:
//
//   - takeover (the latency column): kill → the first Produce to the
//     partition acknowledged by its new owner, sent by a prober that asks
//     a surviving broker's Metadata every 5 ms and produces to whatever
//     leader it names: the broker side of a failover, nearly free of
//     client behaviour;
//   - the timeline behind it, from the same probes: kill → the victim
//     leaves Metadata's broker list (its etcd lease expired) → a live
//     broker is named leader (its claim) → acknowledged (recovery, serving);
//   - client-observed: kill → the first acknowledgement after the kill of
//     a franz-go producer writing one record at a time to the partition,
//     once with franz-go's defaults and once with a short metadata age and
//     retry backoff (MetadataMinAge 100 ms, RetryBackoff 50 ms).
func failover(ctx context.Context, e *Env) error {
	c, topic, probe, err := e.onCluster(ctx, 3, "bench-failover")
	if err != nil {
		return err
	}
	defer c.close()
	defer probe.Close()

	var target atomic.Int32 // the partition the producers write to
	writers := []*ackWatcher{{name: "franz-go defaults"}, {name: "MetadataMinAge 100ms, RetryBackoff 50ms", opts: []kgo.Opt{
		kgo.MetadataMinAge(100 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}}}
	pctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	for _, w := range writers {
		cl, err := e.client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner())}, w.opts...)...)
		if err != nil {
			return err
		}
		defer cl.Close()
		go w.run(pctx, cl, &target)
	}

	var gone, named, all Hist
	moved := 0
	e.Begin()
	for kill := 0; kill == 0 || (e.Running() && ctx.Err() == nil); kill++ {
		before, err := settledLeaders(ctx, probe, c, topic, e.Opts.Partitions)
		if err != nil {
			return err
		}
		p := int32(kill % e.Opts.Partitions)
		victim := before[p]
		target.Store(p)
		// Twice: the first acknowledgement may be of a record sent to the
		// previous target.
		for range 2 {
			if err := waitAcked(ctx, writers, time.Now()); err != nil {
				return err
			}
		}
		killed := time.Now()
		c.kill(victim)
		exited := time.Now()
		for _, w := range writers {
			w.arm(exited)
		}
		tl, err := probeTakeover(ctx, probe, c, topic, p, victim, before, killed)
		if err != nil {
			return err
		}
		e.Rec.Op(0, 0, tl.acked)
		gone.Record(tl.gone)
		named.Record(tl.named)
		all.Record(tl.all)
		moved += tl.moved
		for _, w := range writers {
			at, err := w.firstAfterKill(ctx)
			if err != nil {
				return err
			}
			w.lat.Record(at.Sub(killed))
		}
		if err := c.restart(ctx, victim); err != nil {
			return err
		}
	}
	stopWriters()
	goal := e.Opts.SessionTTL + time.Second
	g, n, a := gone.Snapshot(), named.Snapshot(), all.Snapshot()
	e.Note("timeline p50/p99 from the kill: victim out of Metadata (its lease expired) %s/%s, the partition's new leader named %s/%s, first Produce acknowledged: the table",
		dur(g.Quantile(0.5)), dur(g.Quantile(0.99)), dur(n.Quantile(0.5)), dur(n.Quantile(0.99)))
	e.Note("every partition of the victim's (%.1f per kill) led again: p50 %s, p99 %s", float64(moved)/float64(max(n.Count(), 1)), dur(a.Quantile(0.5)), dur(a.Quantile(0.99)))
	for _, w := range writers {
		s := w.lat.Snapshot()
		e.Note("client-observed (franz-go producer, %s): p50 %s, p99 %s; %d produce errors surfaced", w.name, dur(s.Quantile(0.5)), dur(s.Quantile(0.99)), w.errors.Load())
	}
	e.SetValue(float64(n.Count()), "kills")
	e.Note("goal: p99 takeover ≤ session TTL + 1 s = %v", goal)
	return nil
}

// takeover is one kill's timeline, each measured from the kill, and how
// many partitions the victim led.
type takeover struct {
	gone, named, acked, all time.Duration
	moved                   int
}

// probeTakeover asks the survivors' Metadata every 5 ms and produces to
// the leader they name until one acknowledges and every partition the
// victim led (before) has a live leader again.
func probeTakeover(ctx context.Context, cl *kgo.Client, c *benchCluster, topic string, p, victim int32, before map[int32]int32, killed time.Time) (takeover, error) {
	tl := takeover{moved: len(partitionsLedBy(before, victim))}
	var survivors []int32
	for id := range c.members {
		if id != victim {
			survivors = append(survivors, id)
		}
	}
	batch := batchtest.Plain(time.Now().UnixMilli(), "probe")
	for i := 0; ; i++ {
		if time.Since(killed) > time.Minute {
			return tl, fmt.Errorf("no broker took partition %d over within a minute of killing broker %d", p, victim)
		}
		leaders, live, err := metadataFrom(ctx, cl, survivors[i%len(survivors)], topic)
		if err == nil {
			if tl.gone == 0 && !live[victim] {
				tl.gone = time.Since(killed)
			}
			if l, ok := leaders[p]; ok && l != victim && live[l] && tl.acked == 0 {
				if tl.named == 0 {
					tl.named = time.Since(killed)
				}
				if produceTo(ctx, cl, l, topic, p, batch) == nil {
					tl.acked = time.Since(killed)
				}
			}
			if tl.all == 0 && ledElsewhere(leaders, live, before, victim) {
				tl.all = time.Since(killed)
			}
			if tl.acked != 0 && tl.all != 0 {
				return tl, nil
			}
		}
		select {
		case <-ctx.Done():
			return tl, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// metadataFrom asks broker id for topic's leaders (-1: none) and the live
// brokers.
func metadataFrom(ctx context.Context, cl *kgo.Client, id int32, topic string) (map[int32]int32, map[int32]bool, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = []kmsg.MetadataRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err := cl.Broker(int(id)).Request(rctx, req)
	if err != nil {
		return nil, nil, err
	}
	resp := r.(*kmsg.MetadataResponse)
	live := map[int32]bool{}
	for _, b := range resp.Brokers {
		live[b.NodeID] = true
	}
	leaders := map[int32]int32{}
	for _, t := range resp.Topics {
		for _, pt := range t.Partitions {
			leaders[pt.Partition] = -1
			if pt.ErrorCode == 0 {
				leaders[pt.Partition] = pt.Leader
			}
		}
	}
	return leaders, live, nil
}

// produceTo sends one acks=all Produce of batch to broker id.
func produceTo(ctx context.Context, cl *kgo.Client, id int32, topic string, p int32, batch []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batch
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := cl.Broker(int(id)).Request(rctx, req)
	if err != nil {
		return err
	}
	resp := r.(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return errors.New("malformed produce response")
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// settledLeaders waits until every broker is back in Metadata and every
// partition is led by the broker rendezvous hashing prefers (no hand-off
// pending: a restarted broker has its share back), and returns the
// leaders.
func settledLeaders(ctx context.Context, cl *kgo.Client, c *benchCluster, topic string, partitions int) (map[int32]int32, error) {
	var leaders map[int32]int32
	err := waitFor(ctx, time.Minute, 20*time.Millisecond, "the cluster settled", func() (bool, error) {
		var live map[int32]bool
		var err error
		leaders, live, err = metadataFrom(ctx, cl, 1, topic)
		return err == nil && len(live) == len(c.members) && len(leaders) == partitions && preferredLeaders(leaders, topic, c), nil
	})
	return leaders, err
}

// preferredLeaders: every partition is led by its preferred owner among
// all the cluster's brokers.
func preferredLeaders(leaders map[int32]int32, topic string, c *benchCluster) bool {
	ids := make([]int32, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	for p, l := range leaders {
		if l != ownership.Owner(ownership.PartitionUnit(topic, p), ids) {
			return false
		}
	}
	return true
}

// ackWatcher is a franz-go producer writing one record at a time to the
// target partition, remembering when its last acknowledgement came and
// the first one after a kill.
type ackWatcher struct {
	name    string
	opts    []kgo.Opt
	lastAck atomic.Int64 // unix nanos
	errors  atomic.Int64
	lat     Hist

	mu    sync.Mutex
	after int64 // unix nanos: the victim was gone by then
	first int64 // the first acknowledgement after it
}

// arm starts looking for the first acknowledgement after t (by when the
// killed broker had exited, so it came from another).
func (w *ackWatcher) arm(t time.Time) {
	w.mu.Lock()
	w.after, w.first = t.UnixNano(), 0
	w.mu.Unlock()
}

func (w *ackWatcher) acked(now int64) {
	w.lastAck.Store(now)
	w.mu.Lock()
	if w.after != 0 && w.first == 0 && now > w.after {
		w.first = now
	}
	w.mu.Unlock()
}

// firstAfterKill waits for the first acknowledgement after arm's time.
func (w *ackWatcher) firstAfterKill(ctx context.Context) (time.Time, error) {
	var first int64
	err := waitFor(ctx, 2*time.Minute, time.Millisecond, "an acknowledgement of the producer with "+w.name+" after the kill", func() (bool, error) {
		w.mu.Lock()
		first = w.first
		w.mu.Unlock()
		return first != 0, nil
	})
	return time.Unix(0, first), err
}

func (w *ackWatcher) run(ctx context.Context, cl *kgo.Client, target *atomic.Int32) {
	for ctx.Err() == nil {
		err := cl.ProduceSync(ctx, &kgo.Record{Partition: target.Load(), Value: []byte("failover")}).FirstErr()
		switch {
		case err == nil:
			w.acked(time.Now().UnixNano())
		case ctx.Err() == nil:
			w.errors.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitAcked waits until every writer has been acknowledged after t (each
// writes to the current target partition).
func waitAcked(ctx context.Context, ws []*ackWatcher, t time.Time) error {
	for _, w := range ws {
		err := waitFor(ctx, 2*time.Minute, time.Millisecond, "an acknowledgement of the producer with "+w.name, func() (bool, error) {
			return w.lastAck.Load() > t.UnixNano(), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// partitionsLedBy lists the partitions id leads.
func partitionsLedBy(leaders map[int32]int32, id int32) []int32 {
	var ps []int32
	for p, l := range leaders {
		if l == id {
			ps = append(ps, p)
		}
	}
	return ps
}

// ledElsewhere: every partition victim led (before) has a live leader.
func ledElsewhere(leaders map[int32]int32, live map[int32]bool, before map[int32]int32, victim int32) bool {
	for _, p := range partitionsLedBy(before, victim) {
		if l := leaders[p]; l == victim || !live[l] {
			return false
		}
	}
	return true
}
