package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// requestTimer is a franz-go hook timing one API's requests on the wire:
// from writing the request to having read the response. Unlike a record's
// ack latency it excludes the time records wait in the client's buffer.
type requestTimer struct {
	key   int16
	h     Hist
	bytes atomic.Int64 // response bytes read
}

func (r *requestTimer) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == r.key && e2e.Err() == nil {
		r.h.Record(e2e.DurationE2E())
		r.bytes.Add(int64(e2e.BytesRead))
	}
}

// note adds the request timings to the side's notes, with the records
// each request carried on average.
func (r *requestTimer) note(e *Env, what string) {
	r.noteMean(e, what, "%.0f records per request", float64(e.Rec.records.Load()))
}

// noteBytes adds the request timings and the mean response size (for
// fetches: how much each answer carried) to the side's notes.
func (r *requestTimer) noteBytes(e *Env, what string) {
	r.noteMean(e, what, "%.2f MB per response", float64(r.bytes.Load())/1e6)
}

// noteMean notes the requests' count and latency, and total per request
// in the format mean.
func (r *requestTimer) noteMean(e *Env, what, mean string, total float64) {
	s := r.h.Snapshot()
	if s.Count() == 0 {
		return
	}
	e.Note("%s request on the wire (client write to response read): %d requests, p50 %s, p99 %s, "+mean,
		what, s.Count(), dur(s.Quantile(0.5)), dur(s.Quantile(0.99)), total/float64(s.Count()))
}

// answerWrites counts kaas's answers by how they were written: whole
// from the answering goroutine, begun so and finished through the event
// loop, whole through the loop (in-process kaas only).
func answerWrites(e *Env) [3]float64 {
	if e.Target == nil || e.Target.Metrics == nil {
		return [3]float64{}
	}
	m := e.Target.Metrics
	return [3]float64{counterValue(m.AnswerWritesDirect), counterValue(m.AnswerWritesSplit), counterValue(m.AnswerWritesLoop)}
}

// answerWritesNote adds how the answers since answerWrites gave before
// were written.
func answerWritesNote(e *Env, before [3]float64) {
	after := answerWrites(e)
	if after != before {
		e.Note("kaas answers written whole from the answering goroutine: %.0f, begun so and finished through the event loop: %.0f, through the loop whole: %.0f",
			after[0]-before[0], after[1]-before[1], after[2]-before[2])
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if c.Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// serverLatencyNote adds kaas's own request-duration histogram for api
// (arrival to answer queued) when kaas runs in this process.
func serverLatencyNote(e *Env, api string) {
	if h := gatherHistogram(e, "kaas_request_duration_seconds", "api", api); h != nil {
		e.Note("kaas-side %s latency (arrival to answer queued): %s", api, quantiles(h))
	}
}

// fsyncLatencyNote adds the durations of the log fsyncs of each kind
// (partition logs, transaction state and offsets slots) that kaas did
// since before: the part of a request's latency the disk itself takes.
func fsyncLatencyNote(e *Env, before fsyncCounts) {
	after := readFsyncCounts(e)
	if !before.ok || !after.ok {
		return
	}
	for _, k := range []struct{ metric, what string }{
		{"kaas_fsync_duration_seconds", "partition log"},
		{"kaas_txn_log_fsync_duration_seconds", "transaction state slot"},
		{"kaas_offsets_fsync_duration_seconds", "offsets slot"},
		{"kaas_share_state_fsync_duration_seconds", "share state log"},
	} {
		if h := subHistogram(after.fsyncs[k.metric], before.fsyncs[k.metric]); h != nil {
			e.Note("kaas-side %s fsync: %s", k.what, quantiles(h))
		}
	}
}

// subHistogram is a - b for two readings of one histogram (b earlier, may
// be nil), or nil when nothing was observed between them.
func subHistogram(a, b *dto.Histogram) *dto.Histogram {
	if a == nil {
		return nil
	}
	if d := diffHistogram(a, b); d.GetSampleCount() > 0 {
		return d
	}
	return nil
}

func quantiles(h *dto.Histogram) string {
	return fmt.Sprintf("p50 %s, p99 %s", dur(time.Duration(histogramQuantile(h, 0.5)*1e9)), dur(time.Duration(histogramQuantile(h, 0.99)*1e9)))
}

// gatherHistogram sums an in-process kaas's histogram metric over the
// series whose label is value (every series when label is ""), or nil.
func gatherHistogram(e *Env, metric, label, value string) *dto.Histogram {
	if e.Target == nil || e.Target.Metrics == nil {
		return nil
	}
	fams, err := e.Target.Metrics.Registry.Gather()
	if err != nil {
		return nil
	}
	var merged *dto.Histogram
	for _, f := range fams {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.Metric {
			if label == "" || labelValue(m.Label, label) == value {
				merged = addHistogram(merged, m.GetHistogram())
			}
		}
	}
	if merged == nil || merged.GetSampleCount() == 0 {
		return nil
	}
	return merged
}

// addHistogram sums two histograms with the same buckets (a may be nil).
func addHistogram(a, b *dto.Histogram) *dto.Histogram {
	if a == nil {
		return b
	}
	count := a.GetSampleCount() + b.GetSampleCount()
	out := &dto.Histogram{SampleCount: &count}
	for i, bk := range a.Bucket {
		c := bk.GetCumulativeCount()
		if i < len(b.Bucket) {
			c += b.Bucket[i].GetCumulativeCount()
		}
		ub := bk.GetUpperBound()
		out.Bucket = append(out.Bucket, &dto.Bucket{CumulativeCount: &c, UpperBound: &ub})
	}
	return out
}

// withSetupTimeout bounds a side's setup steps (warm-up transaction,
// group join), so a broker that lacks a feature fails that side in seconds
// rather than when the whole side's budget runs out.
func withSetupTimeout(ctx context.Context, o *Options) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.SetupTimeout)
}
