package admin

import (
	"math"
	"sync"
	"time"

	"kaas/actors/system"
)

// The sampler reads every actor's mailbox counters and the request
// metrics once a second and keeps the last five minutes, so a page opened
// during an incident shows what led up to it. Readers (the JSON API, the
// event stream) take copies under a read lock; the actors are never asked
// anything.

const (
	sampleEvery = time.Second
	keepSamples = 300 // five minutes at one a second
	// maxTracked bounds the actors with a history of their own; idle
	// actors get one only once they have traffic.
	maxTracked = 4096
)

// series is a ring of the last keepSamples values.
type series [keepSamples]float64

// actorSeries is one actor's mailbox depth and messages/s.
type actorSeries struct {
	depth, rate series
	since       int // sample index of its first value
	active      int // sample index of its last non-zero value
}

// actorLast is what the previous sample saw of an actor.
type actorLast struct {
	processed int64
	rate      float64
}

// kindSample is one kind's figures in a sample.
type kindSample struct {
	Kind     string  `json:"kind"`
	Actors   int     `json:"actors"`
	Depth    int64   `json:"mailbox_depth"`
	MaxDepth int64   `json:"max_mailbox_depth"`
	Rate     float64 `json:"messages_per_sec"`
}

type sampler struct {
	actors   *system.System
	requests *requestSampler

	mu      sync.RWMutex
	n       int // samples taken
	at      [keepSamples]time.Time
	depth   series // total mailbox depth
	rate    series // total messages/s
	reqRate series // requests/s, all APIs
	kinds   []kindSample
	last    map[string]actorLast
	tracked map[string]*actorSeries
	tick    chan struct{} // closed when the next sample is taken
}

func newSampler(actors *system.System, requests *requestSampler) *sampler {
	return &sampler{actors: actors, requests: requests, last: map[string]actorLast{},
		tracked: map[string]*actorSeries{}, tick: make(chan struct{})}
}

// run samples until stop is closed.
func (s *sampler) run(stop <-chan struct{}) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	s.sample(time.Now())
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

// next returns a channel closed when the next sample is in.
func (s *sampler) next() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tick
}

func (s *sampler) sample(now time.Time) {
	infos := s.actors.Actors()
	reqRate := s.requests.sample(now)

	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.n % keepSamples
	var prevAt time.Time
	if s.n > 0 {
		prevAt = s.at[(s.n-1)%keepSamples]
	}
	s.at[i] = now
	kinds := map[string]*kindSample{}
	var order []string
	var depth int64
	var rate float64
	seen := make(map[string]bool, len(infos))
	for _, info := range infos {
		seen[info.Name] = true
		d, p := info.Mailbox.Depth(), info.Mailbox.Processed()
		last, ok := s.last[info.Name]
		r := actorRate(last, ok, p, info.Started, prevAt, now)
		s.last[info.Name] = actorLast{processed: p, rate: r}
		depth += d
		rate += r
		k := kinds[info.Kind]
		if k == nil {
			k = &kindSample{Kind: info.Kind}
			kinds[info.Kind] = k
			order = append(order, info.Kind)
		}
		k.Actors++
		k.Depth += d
		k.MaxDepth = max(k.MaxDepth, d)
		k.Rate += r
		h := s.tracked[info.Name]
		busy := d > 0 || r > 0
		if h == nil && busy && len(s.tracked) < maxTracked {
			h = &actorSeries{since: s.n}
			s.tracked[info.Name] = h
		}
		if h != nil {
			h.depth[i], h.rate[i] = float64(d), r
			if busy {
				h.active = s.n
			} else if s.n-h.active >= keepSamples {
				// Idle for the whole window: its series is all zeros,
				// which is what an untracked actor reads as. Dropping
				// it gives back its 4.8 KB and its maxTracked place
				// (a partition written once would otherwise keep both
				// for good).
				delete(s.tracked, info.Name)
			}
		}
	}
	for name := range s.last {
		if !seen[name] {
			delete(s.last, name)
			delete(s.tracked, name)
		}
	}
	s.kinds = s.kinds[:0]
	sortStrings(order)
	for _, k := range order {
		s.kinds = append(s.kinds, *kinds[k])
	}
	s.depth[i], s.rate[i], s.reqRate[i] = float64(depth), rate, reqRate
	s.n++
	close(s.tick)
	s.tick = make(chan struct{})
}

// actorRate is messages/s since the previous sample, or the average since
// the actor started if that sample did not see it (or saw an earlier
// actor of the same name).
func actorRate(last actorLast, seen bool, processed int64, started, prevAt, now time.Time) float64 {
	if seen && processed >= last.processed {
		if dt := now.Sub(prevAt).Seconds(); dt > 0 {
			return float64(processed-last.processed) / dt
		}
		return last.rate
	}
	if up := now.Sub(started).Seconds(); up > 0 {
		return float64(processed) / up
	}
	return 0
}

// rateOf is the actor's messages/s as of the last sample.
func (s *sampler) rateOf(name string) float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last[name].rate
}

// Series is a set of aligned time series: T in unix seconds, and one
// list of values per name.
type Series struct {
	T      []int64              `json:"t"`
	Values map[string][]float64 `json:"values"`
}

// window returns the sample indices of the kept samples, oldest first.
func (s *sampler) window() []int {
	n := min(s.n, keepSamples)
	out := make([]int, n)
	for k := range n {
		out[k] = (s.n - n + k) % keepSamples
	}
	return out
}

func (s *sampler) times(idx []int) []int64 {
	t := make([]int64, len(idx))
	for k, i := range idx {
		t[k] = s.at[i].Unix()
	}
	return t
}

func pick(v *series, idx []int) []float64 {
	out := make([]float64, len(idx))
	for k, i := range idx {
		out[k] = round3(v[i])
	}
	return out
}

// totals is the broker-wide depth, messages/s and requests/s series.
func (s *sampler) totals() Series {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx := s.window()
	return Series{T: s.times(idx), Values: map[string][]float64{
		"mailbox_depth": pick(&s.depth, idx), "messages_per_sec": pick(&s.rate, idx), "requests_per_sec": pick(&s.reqRate, idx),
	}}
}

// kindStats is the latest per-kind sample.
func (s *sampler) kindStats() []kindSample {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]kindSample{}, s.kinds...)
}

// actor is one actor's depth and messages/s series; an actor that never
// had traffic (or beyond maxTracked) reads as zeros.
func (s *sampler) actor(name string) Series {
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx := s.window()
	out := Series{T: s.times(idx), Values: map[string][]float64{}}
	h := s.tracked[name]
	if h == nil {
		out.Values["mailbox_depth"] = make([]float64, len(idx))
		out.Values["messages_per_sec"] = make([]float64, len(idx))
		return out
	}
	first := len(idx) - min(len(idx), s.n-h.since)
	d, r := pick(&h.depth, idx), pick(&h.rate, idx)
	for k := range first { // samples from before it was tracked were idle
		d[k], r[k] = 0, 0
	}
	out.Values["mailbox_depth"], out.Values["messages_per_sec"] = d, r
	return out
}

// round3 keeps three decimals: enough for rates and milliseconds, and
// short in JSON.
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
