package quota

import (
	"sort"
	"sync"
	"sync/atomic"
)

// InactiveExpiryMs is how long a sensor nobody recorded on lives
// (ClientQuotaManager.InactiveSensorExpirationTimeSeconds: an hour).
const InactiveExpiryMs = 3600 * 1000

// MaxSensors bounds the sensors of one kind: a client can make up client
// ids without end, and each new one (under a client-id quota) is a new
// sensor. Past the bound, clients whose tags have no sensor yet share
// one overflow sensor, so a flood of made-up ids is throttled together
// rather than growing the broker's memory; Apache has no such bound.
const MaxSensors = 50000

// OverflowTags names the shared overflow sensor.
var OverflowTags = Tags{User: "*overflow*", ClientID: "*overflow*"}

// Sensors are one kind's per-entity sensors (one of Apache's quota
// managers). Safe for concurrent use: a mutex per sensor, as Apache's
// Sensor is synchronized, and none held across anything but arithmetic.
type Sensors struct {
	kind Kind
	w    Window

	// enabled: some quota of this kind was configured since start (as
	// Apache, it stays so until a restart); until then nothing is
	// recorded and nothing costs more than this load.
	enabled atomic.Bool

	mu      sync.RWMutex
	cfg     *Config
	levels  int // every level quotas were set at since start (sticky)
	version uint64
	byTags  map[Tags]*Sensor
	dropped int64 // clients sent to the overflow sensor
}

// NewSensors makes kind's sensors with window w.
func NewSensors(kind Kind, w Window) *Sensors {
	return &Sensors{kind: kind, w: w, cfg: NewConfig(nil), byTags: map[Tags]*Sensor{}}
}

// Sensor is one quota entity's usage.
type Sensor struct {
	tags Tags

	mu       sync.Mutex
	version  uint64 // of the config limit was resolved under
	limit    float64
	limited  bool
	rate     Rate        // bytes, request time or mutations per second
	bucket   TokenBucket // ControllerMutation only
	throttle Rate        // throttle times, for their average
	count    Rate        // throttles, for the average's denominator
	total    int64       // throttles since creation
	totalMs  int64       // their sum
	last     int64       // last record, for expiry
}

// SetConfig applies a new snapshot of the quotas.
func (s *Sensors) SetConfig(c *Config) {
	s.mu.Lock()
	s.cfg = c
	s.levels |= c.levels(s.kind)
	s.version++
	if s.levels != 0 {
		s.enabled.Store(true)
	}
	s.mu.Unlock()
}

// Enabled reports whether this kind is measured at all.
func (s *Sensors) Enabled() bool { return s.enabled.Load() }

// Window is the sampling the sensors use.
func (s *Sensors) Window() Window { return s.w }

// sensor finds or makes the sensor for a client and brings its limit up
// to date; it returns with the sensor's lock held.
func (s *Sensors) sensor(user, client string, now int64) *Sensor {
	s.mu.RLock()
	cfg, levels, version := s.cfg, s.levels, s.version
	t := cfg.tagsFor(s.kind, levels, user, client)
	sn := s.byTags[t]
	s.mu.RUnlock()
	if sn == nil {
		s.mu.Lock()
		if sn = s.byTags[t]; sn == nil {
			if len(s.byTags) >= MaxSensors {
				s.dropped++
				if sn = s.byTags[OverflowTags]; sn == nil {
					sn = &Sensor{tags: OverflowTags}
					s.byTags[OverflowTags] = sn
				}
			} else {
				sn = &Sensor{tags: t}
				s.byTags[t] = sn
			}
		}
		s.mu.Unlock()
	}
	sn.mu.Lock()
	switch {
	case sn.tags == OverflowTags:
		// Shared by clients of different quotas: each is held to its
		// own limit.
		sn.limit, sn.limited = cfg.limitFor(s.kind, t)
	case sn.version != version:
		sn.limit, sn.limited = cfg.limitFor(s.kind, t)
		sn.version = version
	}
	sn.last = now
	return sn
}

// Record is ClientQuotaManager.recordAndGetThrottleTimeMs: value is
// recorded for the client at now, and if its rate is then above its
// quota, the time to wait for it to come back (ms; the request kind's
// bounded by one window, as ClientRequestQuotaManager's).
func (s *Sensors) Record(user, client string, value float64, now int64) int64 {
	sn := s.sensor(user, client, now)
	defer sn.mu.Unlock()
	sn.rate.Record(s.w, value, now)
	if !sn.limited {
		return 0
	}
	_, ms := sn.rate.Check(s.w, sn.limit, now)
	if s.kind == Request {
		ms = min(ms, s.w.WindowMs)
	}
	return ms
}

// RecordNoThrottle records without checking the quota (recordNoThrottle);
// a negative value un-records (unrecordQuotaSensor).
func (s *Sensors) RecordNoThrottle(user, client string, value float64, now int64) {
	sn := s.sensor(user, client, now)
	sn.rate.Record(s.w, value, now)
	sn.mu.Unlock()
}

// MaxValueInWindow is the most one record can hold without being
// throttled for sure: limit × (samples-1) × window (getMaxValueInQuotaWindow);
// ok false when no quota applies.
func (s *Sensors) MaxValueInWindow(user, client string, now int64) (float64, bool) {
	sn := s.sensor(user, client, now)
	defer sn.mu.Unlock()
	if !sn.limited {
		return 0, false
	}
	return sn.limit * float64(s.w.Samples-1) * float64(s.w.WindowMs) / 1000, true
}

// Throttled records that the client was throttled for ms
// (ClientQuotaManager.throttle's throttle-time sensor).
func (s *Sensors) Throttled(user, client string, ms int64, now int64) {
	if ms <= 0 {
		return
	}
	sn := s.sensor(user, client, now)
	sn.throttle.Record(s.w, float64(ms), now)
	sn.count.Record(s.w, 1, now)
	sn.total++
	sn.totalMs += ms
	sn.mu.Unlock()
}

// Mutation records permits (partitions created or deleted) against the
// controller mutation quota. strict (CreateTopics v6+, CreatePartitions
// v3+, DeleteTopics v5+): a bucket already below zero refuses them and
// nothing is recorded (StrictControllerMutationQuota); otherwise they are
// recorded and the bucket checked after (Permissive). It returns the
// throttle time (0: within quota) and whether the mutation is refused.
func (s *Sensors) Mutation(user, client string, permits float64, strict bool, now int64) (int64, bool) {
	sn := s.sensor(user, client, now)
	defer sn.mu.Unlock()
	if !sn.limited {
		sn.rate.Record(s.w, permits, now)
		return 0, false
	}
	if strict {
		if tokens := sn.bucket.Measure(s.w, sn.limit, now); tokens < 0 {
			return TokenThrottleMs(tokens, sn.limit), true
		}
	}
	sn.rate.Record(s.w, permits, now)
	sn.bucket.Record(s.w, sn.limit, permits, now)
	if tokens := sn.bucket.Measure(s.w, sn.limit, now); !strict && tokens < 0 {
		return TokenThrottleMs(tokens, sn.limit), false
	}
	return 0, false
}

// Stat is one sensor's state, for metrics and the inspector.
type Stat struct {
	Tags Tags
	// Limit is the quota (Limited false: none applies now).
	Limit   float64
	Limited bool
	// Rate is the measured rate (bytes/s, percent, mutations/s).
	Rate float64
	// Tokens: the controller mutation quota's bucket.
	Tokens float64
	// ThrottleAvgMs is Apache's throttle-time: the average throttle over
	// the window; Throttles and ThrottleMs count since the sensor began.
	ThrottleAvgMs float64
	Throttles     int64
	ThrottleMs    int64
}

// Stats lists every sensor's state at now, in tag order.
func (s *Sensors) Stats(now int64) []Stat {
	s.mu.RLock()
	all := make([]*Sensor, 0, len(s.byTags))
	cfg, version := s.cfg, s.version
	for _, sn := range s.byTags {
		all = append(all, sn)
	}
	s.mu.RUnlock()
	out := make([]Stat, 0, len(all))
	for _, sn := range all {
		sn.mu.Lock()
		if sn.version != version && sn.tags != OverflowTags {
			sn.limit, sn.limited = cfg.limitFor(s.kind, sn.tags)
			sn.version = version
		}
		st := Stat{Tags: sn.tags, Limit: sn.limit, Limited: sn.limited, Rate: sn.rate.Measure(s.w, now),
			Throttles: sn.total, ThrottleMs: sn.totalMs}
		if s.kind == ControllerMutation && sn.limited {
			st.Tokens = sn.bucket.Measure(s.w, sn.limit, now)
		}
		if n := sn.count.sum(s.w, now); n > 0 {
			st.ThrottleAvgMs = sn.throttle.sum(s.w, now) / n
		}
		sn.mu.Unlock()
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tags.User != out[j].Tags.User {
			return out[i].Tags.User < out[j].Tags.User
		}
		return out[i].Tags.ClientID < out[j].Tags.ClientID
	})
	return out
}

// Overflowed counts clients sent to the overflow sensor.
func (s *Sensors) Overflowed() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dropped
}

// Expire drops the sensors nobody recorded on for InactiveExpiryMs.
func (s *Sensors) Expire(now int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for t, sn := range s.byTags {
		sn.mu.Lock()
		idle := now-sn.last >= InactiveExpiryMs
		sn.mu.Unlock()
		if idle {
			delete(s.byTags, t)
			n++
		}
	}
	return n
}

// sum is the windowed sum at now (WindowedSum.measure).
func (r *Rate) sum(w Window, now int64) float64 {
	r.purge(w, now)
	total := 0.0
	for i := range r.samples {
		total += r.samples[i].value
	}
	return total
}
