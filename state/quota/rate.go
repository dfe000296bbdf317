// Package quota is Apache Kafka's client quota arithmetic, pure and
// clock-injected (times are Unix milliseconds the caller passes): the
// windowed rate a byte-rate or request-time quota is measured with
// (org.apache.kafka.common.metrics.stats.Rate over a WindowedSum), the
// token bucket of the controller mutation quota (KIP-599), the throttle
// time each derives from a violation (QuotaUtils.throttleTime and
// ControllerMutationQuotaManager.throttleTimeMs), the quota entities and
// their precedence (ClientQuotaManager's DefaultQuotaCallback), and the
// sensors that hold one rate per quota entity.
package quota

import "math"

// Window is a rate's sampling: quota.window.num samples of
// quota.window.size.seconds each (Apache's MetricConfig).
type Window struct {
	Samples  int   // quota.window.num, default 11
	WindowMs int64 // quota.window.size.seconds in ms, default 1000
}

// DefaultWindow is Apache's default: 10 whole windows and the current one.
var DefaultWindow = Window{Samples: 11, WindowMs: 1000}

// sample is one window of a sampled statistic (SampledStat.Sample).
type sample struct {
	value  float64
	events int64
	start  int64
	last   int64
}

func (s *sample) reset(now int64) { *s = sample{start: now, last: now} }

// Rate is Apache's Rate over a WindowedSum: the sum of the values
// recorded in the retained samples divided by the time they span, which
// is taken to be at least Samples-1 whole windows (so a rate measured a
// moment after the first record is not huge). It keeps Samples+1 slots,
// as Apache does since KAFKA-15729: the extra one is the sample that
// overlaps the start of the monitored window.
type Rate struct {
	samples []sample
	current int
}

// Record adds value at now (a negative value un-records, as Apache's
// ClientQuotaManager.unrecordQuotaSensor does for a throttled fetch).
func (r *Rate) Record(w Window, value float64, now int64) {
	s := r.cur(now)
	if now-s.start >= w.WindowMs {
		s = r.advance(w, now)
	}
	s.value += value
	s.events++
	s.last = now
}

func (r *Rate) cur(now int64) *sample {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, sample{start: now, last: now})
	}
	return &r.samples[r.current]
}

func (r *Rate) advance(w Window, now int64) *sample {
	r.current = (r.current + 1) % (w.Samples + 1)
	if r.current >= len(r.samples) {
		r.samples = append(r.samples, sample{start: now, last: now})
	} else {
		r.samples[r.current].reset(now)
	}
	return &r.samples[r.current]
}

// purge resets the samples that saw no event within the monitored
// window (SampledStat.purgeObsoleteSamples).
func (r *Rate) purge(w Window, now int64) {
	expire := int64(w.Samples) * w.WindowMs
	for i := range r.samples {
		if now-r.samples[i].last >= expire {
			r.samples[i].reset(now)
		}
	}
}

func (r *Rate) oldest(now int64) *sample {
	r.cur(now)
	o := &r.samples[0]
	for i := 1; i < len(r.samples); i++ {
		if r.samples[i].start < o.start {
			o = &r.samples[i]
		}
	}
	return o
}

// WindowSize is the time in ms the rate divides by at now: the time since
// the oldest retained sample began, at least Samples-1 whole windows,
// at least 1 ms (Rate.windowSize).
func (r *Rate) WindowSize(w Window, now int64) int64 {
	r.purge(w, now)
	total := now - r.oldest(now).start
	full := total / w.WindowMs
	if minFull := int64(w.Samples - 1); full < minFull {
		total += (minFull - full) * w.WindowMs
	}
	return max(total, 1)
}

// Measure is the rate per second at now.
func (r *Rate) Measure(w Window, now int64) float64 {
	r.purge(w, now)
	sum := 0.0
	for i := range r.samples {
		sum += r.samples[i].value
	}
	return sum / (float64(r.WindowSize(w, now)) / 1000)
}

// Check is Measure and ThrottleMs at once (a quota's check after every
// record): the rate at now and, if it is above bound, the throttle time;
// one purge and one pass over the samples instead of three.
func (r *Rate) Check(w Window, bound float64, now int64) (rate float64, throttleMs int64) {
	ws := r.WindowSize(w, now) // purges
	sum := 0.0
	for i := range r.samples {
		sum += r.samples[i].value
	}
	rate = sum / (float64(ws) / 1000)
	if rate > bound && bound > 0 {
		throttleMs = javaRound((rate - bound) / bound * float64(ws))
	}
	return rate, throttleMs
}

// ThrottleMs is how long a client whose rate is observed at value
// against bound must wait for the rate to come back to the bound if
// nothing more is recorded: X = (O - T) / T × W (QuotaUtils.throttleTime,
// W the rate's window size at now), rounded as Java's Math.round.
func (r *Rate) ThrottleMs(w Window, value, bound float64, now int64) int64 {
	if !(value > bound) || bound <= 0 {
		return 0
	}
	return javaRound((value - bound) / bound * float64(r.WindowSize(w, now)))
}

// TokenBucket is KIP-599's token bucket (stats.TokenBucket): it refills
// at the quota's rate up to a burst of Samples × window × quota and
// records take tokens; below zero the quota is violated.
type TokenBucket struct {
	tokens float64
	last   int64
}

func (t *TokenBucket) refill(w Window, quota float64, now int64) {
	burst := float64(w.Samples) * float64(w.WindowMs) / 1000 * quota
	t.tokens = math.Min(burst, t.tokens+quota*float64(now-t.last)/1000)
	t.last = now
}

// Measure is the tokens left at now.
func (t *TokenBucket) Measure(w Window, quota float64, now int64) float64 {
	t.refill(w, quota, now)
	return t.tokens
}

// Record takes value tokens at now.
func (t *TokenBucket) Record(w Window, quota, value float64, now int64) {
	t.refill(w, quota, now)
	burst := float64(w.Samples) * float64(w.WindowMs) / 1000 * quota
	t.tokens = math.Min(burst, t.tokens-value)
}

// TokenThrottleMs is the time for a bucket at tokens (< 0) to refill to
// zero at quota tokens per second (ControllerMutationQuotaManager.throttleTimeMs).
func TokenThrottleMs(tokens, quota float64) int64 {
	if tokens >= 0 || quota <= 0 {
		return 0
	}
	return javaRound(-tokens / quota * 1000)
}

// javaRound is Java's Math.round: floor(x + 0.5), NaN → 0, clamped to
// the int64 range.
func javaRound(x float64) int64 {
	if math.IsNaN(x) {
		return 0
	}
	f := math.Floor(x + 0.5)
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	if f <= math.MinInt64 {
		return math.MinInt64
	}
	return int64(f)
}
