package admin

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// requestSampler turns the request collectors /metrics exports
// (kaas_requests_total, kaas_request_errors_total,
// kaas_request_duration_seconds) into per-API rates and latency
// percentiles: the table over the last rateWindow, the sparklines one
// point a second.

const rateWindow = 10 // samples (seconds) the table's rates and percentiles cover

// apiCum is one API's cumulative figures at one sample, summed over
// versions.
type apiCum struct {
	at       time.Time
	count    float64
	errors   float64
	sum      float64   // seconds
	buckets  []float64 // cumulative counts, aligned with bounds
	byError  map[string]float64
	versions map[string]float64
}

type apiHistory struct {
	cums   []apiCum // the last rateWindow+1 samples, oldest first
	rate   series   // requests/s
	p99    series   // ms; NaN when the second had no requests
	errors series   // errors/s
}

type requestSampler struct {
	g      prometheus.Gatherer
	mu     sync.RWMutex
	bounds []float64 // histogram upper bounds (seconds), from the first gather
	apis   map[string]*apiHistory
	n      int
}

func newRequestSampler(g prometheus.Gatherer) *requestSampler {
	return &requestSampler{g: g, apis: map[string]*apiHistory{}}
}

// sample gathers the collectors once and returns requests/s over the last
// second, all APIs together.
func (r *requestSampler) sample(now time.Time) float64 {
	if r == nil || r.g == nil {
		return 0
	}
	fams, err := r.g.Gather()
	if err != nil {
		return 0
	}
	cur := map[string]*apiCum{}
	get := func(api string) *apiCum {
		c := cur[api]
		if c == nil {
			c = &apiCum{at: now, byError: map[string]float64{}, versions: map[string]float64{}}
			cur[api] = c
		}
		return c
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			api, version, errName := labels(m)
			switch f.GetName() {
			case "kaas_requests_total":
				c := get(api)
				c.count += m.GetCounter().GetValue()
				c.versions[version] += m.GetCounter().GetValue()
			case "kaas_request_errors_total":
				c := get(api)
				c.errors += m.GetCounter().GetValue()
				c.byError[errName] += m.GetCounter().GetValue()
			case "kaas_request_duration_seconds":
				c := get(api)
				h := m.GetHistogram()
				c.sum += h.GetSampleSum()
				bs := h.GetBucket()
				if r.bounds == nil {
					for _, b := range bs {
						r.bounds = append(r.bounds, b.GetUpperBound())
					}
					r.bounds = append(r.bounds, math.Inf(1)) // the implicit +Inf bucket
				}
				if c.buckets == nil {
					c.buckets = make([]float64, len(r.bounds))
				}
				for i, b := range bs {
					if i < len(c.buckets)-1 {
						c.buckets[i] += float64(b.GetCumulativeCount())
					}
				}
				c.buckets[len(c.buckets)-1] += float64(h.GetSampleCount())
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.n % keepSamples
	total := 0.0
	for api, c := range cur {
		h := r.apis[api]
		if h == nil {
			h = &apiHistory{}
			for k := range h.p99 {
				h.p99[k] = math.NaN()
			}
			r.apis[api] = h
		}
		if len(h.cums) > 0 {
			prev := h.cums[len(h.cums)-1]
			if dt := now.Sub(prev.at).Seconds(); dt > 0 {
				h.rate[i] = (c.count - prev.count) / dt
				h.errors[i] = (c.errors - prev.errors) / dt
				h.p99[i] = quantile(0.99, r.bounds, prev.buckets, c.buckets) * 1000
				total += h.rate[i]
			}
		} else {
			h.p99[i] = math.NaN()
		}
		h.cums = append(h.cums, *c)
		if len(h.cums) > rateWindow+1 {
			h.cums = append(h.cums[:0], h.cums[1:]...)
		}
	}
	r.n++
	return total
}

func labels(m *dto.Metric) (api, version, errName string) {
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "api":
			api = l.GetValue()
		case "version":
			version = l.GetValue()
		case "error":
			errName = l.GetValue()
		}
	}
	return
}

// quantile is Prometheus's histogram_quantile over the requests between
// two cumulative bucket snapshots (the last bucket is +Inf): linear
// within the bucket the rank falls in, the highest finite bound past it;
// NaN when there were no requests.
func quantile(q float64, bounds, from, to []float64) float64 {
	if len(to) < 2 || len(bounds) != len(to) {
		return math.NaN()
	}
	delta := func(i int) float64 {
		if i < len(from) {
			return to[i] - from[i]
		}
		return to[i]
	}
	total := delta(len(to) - 1)
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i := range to {
		c := delta(i)
		if c >= rank {
			if math.IsInf(bounds[i], 1) {
				return bounds[i-1]
			}
			if c == below {
				return bounds[i]
			}
			return lower + (bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = bounds[i], c
	}
	return bounds[len(bounds)-2]
}

// APIStats is one API's row in the overview.
type APIStats struct {
	API            string  `json:"api"`
	RequestsPerSec float64 `json:"requests_per_sec"`
	ErrorsPerSec   float64 `json:"errors_per_sec"`
	// P50Ms, P99Ms and MeanMs cover the last rateWindow seconds; null
	// when no request arrived in them.
	P50Ms         *float64 `json:"p50_ms"`
	P99Ms         *float64 `json:"p99_ms"`
	MeanMs        *float64 `json:"mean_ms"`
	RequestsTotal float64  `json:"requests_total"`
	// Versions counts requests by API version since start.
	Versions map[string]float64 `json:"versions"`
	// Errors counts error codes sent, by Kafka error name, since start.
	Errors map[string]float64 `json:"errors"`
	// Series is requests/s, errors/s and p99 ms, one point a second.
	Series Series `json:"series"`
}

// stats is the per-API table, busiest first, with each API's series
// aligned to times (unix seconds of the sampler's samples).
func (r *requestSampler) stats(times []int64) []APIStats {
	if r == nil {
		return []APIStats{}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]APIStats, 0, len(r.apis))
	n := min(len(times), r.n, keepSamples)
	idx := make([]int, n)
	for k := range n {
		idx[k] = (r.n - n + k) % keepSamples
	}
	for api, h := range r.apis {
		last := h.cums[len(h.cums)-1]
		first := h.cums[0]
		s := APIStats{API: api, RequestsTotal: last.count, Versions: last.versions, Errors: last.byError}
		if dt := last.at.Sub(first.at).Seconds(); dt > 0 {
			s.RequestsPerSec = round3((last.count - first.count) / dt)
			s.ErrorsPerSec = round3((last.errors - first.errors) / dt)
			if d := last.count - first.count; d > 0 {
				mean := round3((last.sum - first.sum) / d * 1000)
				s.MeanMs = &mean
			}
		}
		s.P50Ms = msOrNil(quantile(0.5, r.bounds, first.buckets, last.buckets))
		s.P99Ms = msOrNil(quantile(0.99, r.bounds, first.buckets, last.buckets))
		s.Series = Series{T: times[len(times)-n:], Values: map[string][]float64{
			"requests_per_sec": pick(&h.rate, idx), "errors_per_sec": pick(&h.errors, idx), "p99_ms": pickNullable(&h.p99, idx),
		}}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].RequestsTotal != out[j].RequestsTotal {
			return out[i].RequestsTotal > out[j].RequestsTotal
		}
		return out[i].API < out[j].API
	})
	return out
}

func msOrNil(seconds float64) *float64 {
	if math.IsNaN(seconds) {
		return nil
	}
	v := round3(seconds * 1000)
	return &v
}

// pickNullable is pick for series with gaps: NaN becomes -1, which the
// page draws as a gap (JSON has no NaN).
func pickNullable(v *series, idx []int) []float64 {
	out := pick(v, idx)
	for k, x := range out {
		if math.IsNaN(x) {
			out[k] = -1
		}
	}
	return out
}
