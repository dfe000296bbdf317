package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(&Scenario{
		Name: "fence",
		About: "fence fan-out: InitProducerId epoch bumps of a transactional id whose producer has written to all " +
			"--fence-partitions local partitions; the fence is in force on every one of them before the answer " +
			"(kaas_fence_fanout_seconds: bump to fence in force everywhere; goal p99 < 5 ms)",
		Headline: "bumps", Latency: "InitProducerId",
		Params: func(o *Options) string {
			rate := "back to back"
			if o.FenceRate > 0 {
				rate = fmt.Sprintf("%d bumps/s", o.FenceRate)
			}
			return fmt.Sprintf("%d partitions, %s, %v measured per side", o.FencePartitions, rate, o.Duration)
		},
		Run: fenceFanOut,
	})
}

// fenceFanOut first has a transactional producer write one record to every
// partition (so each partition holds its state), then repeatedly
// re-initialises the transactional id claiming the identity it was last
// given (KIP-360): every call is an epoch bump that must fence the old
// epoch on every one of those partitions.
func fenceFanOut(ctx context.Context, e *Env) error {
	topic := uniqueTopic("bench-fence")
	if err := e.createTopic(ctx, topic, e.Opts.FencePartitions); err != nil {
		return err
	}
	cl, err := e.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	id := uniqueTopic("bench-fence-id")
	var (
		pid   int64
		epoch int16
	)
	initPID := func(ctx context.Context) (time.Duration, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60_000
		req.ProducerID, req.ProducerEpoch = pid, epoch
		for {
			start := time.Now()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return 0, err
			}
			switch code := resp.ErrorCode; code {
			case 0:
				pid, epoch = resp.ProducerID, resp.ProducerEpoch
				return time.Since(start), nil
			case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code:
				if ctx.Err() != nil {
					return 0, ctx.Err()
				}
				time.Sleep(time.Millisecond) // retriable: try again
			default:
				return 0, fmt.Errorf("InitProducerId: %w", kerr.ErrorForCode(code))
			}
		}
	}
	sctx, cancel := withSetupTimeout(ctx, e.Opts)
	defer cancel()
	if pid, epoch, err = touchEveryPartition(sctx, e, topic, id); err != nil {
		return fmt.Errorf("writing to every partition: %w", err)
	}
	before := brokerHistograms(e, fenceHistograms...)
	fsyncsBefore := readFsyncCounts(e)
	var pace <-chan time.Time
	if e.Opts.FenceRate > 0 {
		t := time.NewTicker(time.Second / time.Duration(e.Opts.FenceRate))
		defer t.Stop()
		pace = t.C
	}
	e.Begin()
	for e.Running() {
		if pace != nil {
			select {
			case <-pace:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		lat, err := initPID(ctx)
		if err != nil {
			return err
		}
		e.Rec.Op(0, 0, lat)
	}
	// Reading the broker's metrics (and timing the machine's fsync) is
	// not part of the bumps: the kfake side has none of it.
	e.EndMeasuring()
	fenceBreakdownNote(e, before, fsyncsBefore)
	return nil
}

// fenceHistograms are the parts of one bump the broker times: the fence in
// force on every local partition, and the two fsyncs the answer waits for
// (they run concurrently: the bumped transaction state, and the fence
// file's record).
var fenceHistograms = []string{"kaas_fence_fanout_seconds", "kaas_txn_log_fsync_duration_seconds", "kaas_fence_file_fsync_seconds"}

// fenceBreakdownNote says, for an in-process kaas, what each part of a
// bump took over the run, how many fsyncs of each kind a bump cost, and
// the machine's fsync at the end of the run (the floor of a bump's
// latency: it must wait for an fsync, R-IPI-11).
func fenceBreakdownNote(e *Env, before map[string]*dto.Histogram, fsyncsBefore fsyncCounts) {
	if e.Target.Metrics == nil {
		return
	}
	after := brokerHistograms(e, fenceHistograms...)
	for _, name := range fenceHistograms {
		a := after[name]
		if a == nil {
			e.Note("broker exports no %s histogram", name)
			continue
		}
		h := diffHistogram(a, before[name])
		e.Note("broker %s over the run: %d, p50 %s, p99 %s", name,
			h.GetSampleCount(), dur(time.Duration(histogramQuantile(h, 0.5)*1e9)), dur(time.Duration(histogramQuantile(h, 0.99)*1e9)))
	}
	fsyncsPerOpNote(e, fsyncsBefore, "bump")
	var pace time.Duration
	if e.Opts.FenceRate > 0 {
		pace = time.Second / time.Duration(e.Opts.FenceRate)
	}
	fsyncNote(e, pace)
}

// touchEveryPartition commits one transaction with a record on every
// partition of topic and returns the producer identity it used.
func touchEveryPartition(ctx context.Context, e *Env, topic, id string) (int64, int16, error) {
	cl, err := e.client(kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return 0, 0, err
	}
	var fail firstError
	for p := 0; p < e.Opts.FencePartitions; p++ {
		cl.Produce(ctx, &kgo.Record{Value: []byte("x"), Partition: int32(p)}, func(_ *kgo.Record, err error) { fail.set(err) })
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, 0, err
	}
	if err := fail.get(); err != nil {
		return 0, 0, err
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, 0, err
	}
	return cl.ProducerID(ctx)
}

// brokerHistograms reads the named histograms (unlabelled) of the broker
// when kaas runs in this process; a missing one is absent from the map.
func brokerHistograms(e *Env, names ...string) map[string]*dto.Histogram {
	out := map[string]*dto.Histogram{}
	if e.Target.Metrics == nil {
		return out
	}
	fams, err := e.Target.Metrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range fams {
		for _, name := range names {
			if f.GetName() == name && len(f.Metric) > 0 {
				out[name] = f.Metric[0].GetHistogram()
			}
		}
	}
	return out
}

// diffHistogram is a - b bucket by bucket (b may be nil).
func diffHistogram(a, b *dto.Histogram) *dto.Histogram {
	out := &dto.Histogram{}
	count := a.GetSampleCount()
	if b != nil {
		count -= b.GetSampleCount()
	}
	out.SampleCount = &count
	for i, bk := range a.Bucket {
		c := bk.GetCumulativeCount()
		if b != nil && i < len(b.Bucket) {
			c -= b.Bucket[i].GetCumulativeCount()
		}
		ub := bk.GetUpperBound()
		out.Bucket = append(out.Bucket, &dto.Bucket{CumulativeCount: &c, UpperBound: &ub})
	}
	return out
}

// histogramQuantile interpolates within buckets, as PromQL's
// histogram_quantile does.
func histogramQuantile(h *dto.Histogram, q float64) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	bks := append([]*dto.Bucket(nil), h.Bucket...)
	sort.Slice(bks, func(i, j int) bool { return bks[i].GetUpperBound() < bks[j].GetUpperBound() })
	rank := q * total
	prevUB, prevCount := 0.0, 0.0
	for _, b := range bks {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if math.IsInf(b.GetUpperBound(), 1) {
				return prevUB
			}
			if c == prevCount {
				return b.GetUpperBound()
			}
			return prevUB + (b.GetUpperBound()-prevUB)*(rank-prevCount)/(c-prevCount)
		}
		prevUB, prevCount = b.GetUpperBound(), c
	}
	return prevUB
}
