package bench

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/storage/partlog/batchtest"
)

func init() {
	register(&Scenario{
		Name: "reassign",
		About: "AlterPartitionReassignments of a partition to another broker of a cluster of 3 broker processes → " +
			"first produce to it acknowledged by that broker (goal p99 ≤ 1 s), while a franz-go producer keeps writing to it; " +
			"reassignments go round the partitions and brokers",
		Headline: "reassignments", Latency: "reassignment",
		Sides:    []string{"kaas"},
		NoTarget: true,
		Params: func(o *Options) string {
			return fmt.Sprintf("3 brokers, %d partitions, reassignments until %v have passed (at least one)", o.Partitions, o.Duration)
		},
		Run: reassign,
	})
}

// reassign times a reassignment the way an operator sees it end: from the
// AlterPartitionReassignments request to the first Produce the new owner
// acknowledges, with a prober asking broker 1's Metadata every 2 ms and
// producing to whatever leader it names (the hand-off: the old owner
// fsyncs, closes and releases its etcd key; the new one claims, recovers
// and serves). A franz-go producer writing one record at a time to the
// partition being moved counts the errors that surface to it.
func reassign(ctx context.Context, e *Env) error {
	c, topic, probe, err := e.onCluster(ctx, 3, "bench-reassign")
	if err != nil {
		return err
	}
	defer c.close()
	defer probe.Close()
	adm := kadm.NewClient(probe)

	var target atomic.Int32
	w := &ackWatcher{name: "franz-go defaults"}
	pctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	cl, err := e.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	go w.run(pctx, cl, &target)

	ids := make([]int32, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	batch := batchtest.Plain(time.Now().UnixMilli(), "probe")
	var named Hist
	e.Begin()
	for n := 0; n == 0 || (e.Running() && ctx.Err() == nil); n++ {
		p := int32(n % e.Opts.Partitions)
		target.Store(p)
		leaders, _, err := metadataFrom(ctx, probe, ids[0], topic)
		if err != nil {
			return err
		}
		to := ids[(indexOf(ids, leaders[p])+1)%len(ids)]
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, p, []int32{to})
		start := time.Now()
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			return fmt.Errorf("reassigning partition %d to broker %d: %w", p, to, err)
		}
		seen := time.Duration(0)
		err = waitFor(ctx, 30*time.Second, 2*time.Millisecond, fmt.Sprintf("partition %d acknowledged by broker %d", p, to), func() (bool, error) {
			leaders, _, err := metadataFrom(ctx, probe, ids[0], topic)
			if err != nil || leaders[p] != to {
				return false, nil
			}
			if seen == 0 {
				seen = time.Since(start)
			}
			return produceTo(ctx, probe, to, topic, p, batch) == nil, nil
		})
		if err != nil {
			return err
		}
		e.Rec.Op(0, 0, time.Since(start))
		named.Record(seen)
	}
	stopWriter()
	s := named.Snapshot()
	e.Note("the new owner named in Metadata: p50 %s, p99 %s; first Produce it acknowledged: the table", dur(s.Quantile(0.5)), dur(s.Quantile(0.99)))
	e.Note("franz-go producer writing to the partition being moved: %d produce errors surfaced", w.errors.Load())
	e.SetValue(float64(s.Count()), "reassignments")
	e.Note("goal: p99 reassignment ≤ 1 s")
	return nil
}

func indexOf(ids []int32, id int32) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return 0
}
