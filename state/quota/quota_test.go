package quota

import (
	"math"
	"testing"
)

// Apache's ClientQuotaManagerTest.testQuotaViolation: quota 500 B/s,
// 400 B/s for ten seconds stays within it; 2000 bytes more makes the
// rate (10×400+2000)/10 = 600 B/s, and (600-500)/500 × 10 s = 2 s.
func TestRateThrottleAsApache(t *testing.T) {
	s := NewSensors(Produce, DefaultWindow)
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{ClientID: DefaultName}: {ProducerByteRate: 500}}))
	now := int64(1_000_000)
	for i := 0; i < 10; i++ {
		if ms := s.Record("ANONYMOUS", "unknown", 400, now); ms != 0 {
			t.Fatalf("record %d: throttled %d ms within quota", i, ms)
		}
		now += 1000
	}
	if ms := s.Record("ANONYMOUS", "unknown", 2000, now); ms != 2000 {
		t.Fatalf("throttle %d ms, want 2000", ms)
	}
	// The formula assumes the old samples stay while the new ones are
	// empty; in fact the oldest age out too, so it takes a little longer
	// here: after 3 s the first three samples have gone, 4800 B over 10 s.
	now += 3000
	if ms := s.Record("ANONYMOUS", "unknown", 0, now); ms != 0 {
		t.Fatalf("still throttled %d ms after waiting the throttle out", ms)
	}
}

// Rate.windowSize counts at least samples-1 whole windows: a burst right
// after the first record is measured over 10 s, not over 1 ms.
func TestRateWindowSizeFloor(t *testing.T) {
	var r Rate
	w := DefaultWindow
	r.Record(w, 1000, 0)
	if got := r.WindowSize(w, 1); got != 10001 {
		t.Fatalf("window size %d, want 10001", got)
	}
	if got := r.Measure(w, 0); math.Abs(got-100) > 1e-9 {
		t.Fatalf("rate %v, want 100", got)
	}
	// Samples older than samples×window are purged.
	r.Record(w, 1, 5000)
	if got := r.Measure(w, 5000+11000); got != 0 {
		t.Fatalf("rate %v after every sample expired, want 0", got)
	}
}

// The request quota's throttle is at most one window
// (ClientRequestQuotaManager.maxThrottleTimeMs).
func TestRequestThrottleBounded(t *testing.T) {
	s := NewSensors(Request, DefaultWindow)
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{User: DefaultName}: {RequestPercentage: 1}}))
	if ms := s.Record("u", "c", 500, 0); ms != 1000 {
		t.Fatalf("request throttle %d, want the 1000 ms bound", ms)
	}
}

// Un-recording (a throttled fetch) brings the sum back.
func TestUnrecord(t *testing.T) {
	s := NewSensors(Fetch, DefaultWindow)
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{ClientID: Named("c")}: {ConsumerByteRate: 100}}))
	if ms := s.Record("u", "c", 5000, 0); ms == 0 {
		t.Fatal("5000 bytes at 100 B/s not throttled")
	}
	s.RecordNoThrottle("u", "c", -5000, 0)
	if ms := s.Record("u", "c", 500, 0); ms != 0 {
		t.Fatalf("throttled %d ms after un-recording", ms)
	}
	if v, ok := s.MaxValueInWindow("u", "c", 0); !ok || v != 1000 {
		t.Fatalf("max value in window %v %v, want 1000 (100 × 10 s)", v, ok)
	}
}

// The eight levels of precedence of ClientQuotaManager, most specific
// first: removing each level in turn hands the client to the next.
func TestPrecedence(t *testing.T) {
	u, c := Named("alice"), Named("app")
	levels := []struct {
		e    Entity
		tags Tags
	}{
		{Entity{User: u, ClientID: c}, Tags{"alice", "app"}},
		{Entity{User: u, ClientID: DefaultName}, Tags{"alice", "app"}},
		{Entity{User: u}, Tags{User: "alice"}},
		{Entity{User: DefaultName, ClientID: c}, Tags{"alice", "app"}},
		{Entity{User: DefaultName, ClientID: DefaultName}, Tags{"alice", "app"}},
		{Entity{User: DefaultName}, Tags{User: "alice"}},
		{Entity{ClientID: c}, Tags{ClientID: "app"}},
		{Entity{ClientID: DefaultName}, Tags{ClientID: "app"}},
	}
	for i := range levels {
		entries := map[Entity]map[string]float64{}
		for j := i; j < len(levels); j++ {
			entries[levels[j].e] = map[string]float64{ProducerByteRate: float64(j + 1)}
		}
		cfg := NewConfig(entries)
		tags, limit, ok := cfg.Resolve(Produce, "alice", "app")
		if !ok || limit != float64(i+1) || tags != levels[i].tags {
			t.Errorf("level %d (%v): got tags %+v limit %v ok %v, want %+v limit %d", i+1, levels[i].e, tags, limit, ok, levels[i].tags, i+1)
		}
		// Another kind's quotas do not apply.
		if _, _, ok := cfg.Resolve(Fetch, "alice", "app"); ok {
			t.Errorf("level %d: a producer quota applied to fetches", i+1)
		}
	}
	// A single level: its tags, whether or not it matches.
	cfg := NewConfig(map[Entity]map[string]float64{{User: Named("bob")}: {ConsumerByteRate: 1}})
	if tags, _, ok := cfg.Resolve(Fetch, "alice", "app"); ok || tags != (Tags{User: "alice"}) {
		t.Errorf("user level only: alice got %+v ok %v", tags, ok)
	}
}

// Sensors pick up a changed quota, and a client under a user quota
// shares the user's sensor with the user's other clients.
func TestSensorsShareAndUpdate(t *testing.T) {
	s := NewSensors(Produce, DefaultWindow)
	if s.Enabled() {
		t.Fatal("enabled without quotas")
	}
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{User: Named("alice")}: {ProducerByteRate: 1000}}))
	if !s.Enabled() {
		t.Fatal("not enabled with a quota")
	}
	s.Record("alice", "a", 6000, 0)
	if ms := s.Record("alice", "b", 6000, 0); ms == 0 {
		t.Fatal("alice's second client not throttled on the shared user sensor")
	}
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{User: Named("alice")}: {ProducerByteRate: 1e9}}))
	if ms := s.Record("alice", "a", 0, 0); ms != 0 {
		t.Fatalf("throttled %d ms after the quota was raised", ms)
	}
	st := s.Stats(0)
	if len(st) != 1 || st[0].Tags != (Tags{User: "alice"}) || st[0].Limit != 1e9 {
		t.Fatalf("stats %+v", st)
	}
	if n := s.Expire(InactiveExpiryMs); n != 1 {
		t.Fatalf("expired %d sensors, want 1", n)
	}
}

// Past MaxSensors, new clients share the overflow sensor.
func TestSensorsBounded(t *testing.T) {
	s := NewSensors(Produce, DefaultWindow)
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{ClientID: DefaultName}: {ProducerByteRate: 1e6}}))
	for i := 0; i < MaxSensors+100; i++ {
		s.Record("u", string(rune(i+1))+"x", 1, 0)
	}
	if n := len(s.Stats(0)); n != MaxSensors+1 {
		t.Fatalf("%d sensors, want %d", n, MaxSensors+1)
	}
	if s.Overflowed() != 100 {
		t.Fatalf("overflowed %d, want 100", s.Overflowed())
	}
}

// KIP-599's token bucket: burst = samples × window × quota; a strict
// quota refuses once the bucket is below zero, for -tokens/quota s.
func TestControllerMutation(t *testing.T) {
	s := NewSensors(ControllerMutation, DefaultWindow)
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{User: DefaultName}: {ControllerMutationRate: 10}}))
	// The bucket starts empty (Apache's TokenBucket starts at 0 tokens
	// and refills from time 0), so at now=1000 it holds 10.
	if ms, refused := s.Mutation("u", "c", 30, true, 1000); refused || ms != 0 {
		t.Fatalf("first mutation refused=%v ms=%d", refused, ms)
	}
	ms, refused := s.Mutation("u", "c", 1, true, 1000)
	if !refused || ms != 2000 {
		t.Fatalf("over quota: refused=%v ms=%d, want refused after 2000 ms (-20 tokens at 10/s)", refused, ms)
	}
	// Permissive: recorded, throttled, not refused.
	ms, refused = s.Mutation("u", "c", 10, false, 1000)
	if refused || ms != 3000 {
		t.Fatalf("permissive: refused=%v ms=%d, want 3000", refused, ms)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		e       Entity
		unknown []string
		key     string
		value   float64
		want    string
	}{
		{Entity{}, nil, "", 0, "Invalid empty client quota entity"},
		{Entity{User: Named("a")}, []string{"group"}, "", 0, "Unhandled client quota entity type: group"},
		{Entity{User: Named("")}, nil, "", 0, "Empty user not supported"},
		{Entity{IP: Named("1.2.3.4"), User: Named("a")}, nil, "", 0, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{Entity{IP: Named("not-an-ip")}, nil, "", 0, "not-an-ip is not a valid IP or resolvable host."},
		{Entity{User: Named("a")}, nil, "bogus", 1, "Invalid configuration key bogus"},
		{Entity{User: Named("a")}, nil, ProducerByteRate, -1, "Quota producer_byte_rate must be greater than 0"},
		{Entity{User: Named("a")}, nil, ProducerByteRate, math.NaN(), "Quota producer_byte_rate must be greater than 0"},
		{Entity{User: Named("a")}, nil, ProducerByteRate, 1.5, "producer_byte_rate cannot be a fractional value."},
		{Entity{User: Named("a")}, nil, ProducerByteRate, 1e300, "Proposed value for producer_byte_rate is too large for a LONG."},
		{Entity{IP: DefaultName}, nil, ConnectionCreationRate, 1e10, "Proposed value for connection_creation_rate is too large for an INT."},
		{Entity{IP: DefaultName}, nil, ProducerByteRate, 1, "Invalid configuration key producer_byte_rate"},
		{Entity{User: Named("a")}, nil, RequestPercentage, 0.5, ""},
	} {
		err := ValidateEntity(tc.e, tc.unknown)
		if err == nil && tc.key != "" {
			err = ValidateValue(tc.e, tc.key, tc.value)
		}
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%v %s=%v: %q, want %q", tc.e, tc.key, tc.value, got, tc.want)
		}
	}
}

func TestEntityKeyRoundTrip(t *testing.T) {
	for _, e := range []Entity{
		{User: Named("a/b&c=d"), ClientID: DefaultName},
		{ClientID: Named("x y")},
		{User: DefaultName},
		{IP: Named("::1")},
	} {
		got, err := ParseKey(e.Key())
		if err != nil || got != e {
			t.Errorf("%v: key %q parsed to %v, %v", e, e.Key(), got, err)
		}
	}
	if s := (Entity{User: Named("u"), ClientID: DefaultName}).String(); s != "ClientQuotaEntity(entries={client-id=null, user=u})" {
		t.Errorf("String %q", s)
	}
}

func TestDescribeFilter(t *testing.T) {
	cfg := NewConfig(map[Entity]map[string]float64{
		{User: Named("alice")}:                       {ProducerByteRate: 1},
		{User: Named("alice"), ClientID: Named("x")}: {ProducerByteRate: 2},
		{User: DefaultName}:                          {ProducerByteRate: 3},
		{ClientID: DefaultName}:                      {ConsumerByteRate: 4},
	})
	alice := "alice"
	for _, tc := range []struct {
		comps  []FilterComponent
		strict bool
		want   int
		err    string
	}{
		{nil, false, 4, ""},
		{[]FilterComponent{{Type: TypeUser, MatchType: MatchExact, Match: &alice}}, false, 2, ""},
		{[]FilterComponent{{Type: TypeUser, MatchType: MatchExact, Match: &alice}}, true, 1, ""},
		{[]FilterComponent{{Type: TypeUser, MatchType: MatchDefault}}, false, 1, ""},
		{[]FilterComponent{{Type: TypeUser, MatchType: MatchSpecified}}, false, 3, ""},
		{[]FilterComponent{{Type: TypeClientID, MatchType: MatchSpecified}}, true, 1, ""},
		{[]FilterComponent{{Type: "group", MatchType: MatchSpecified}}, false, 0, "Unsupported entity type group"},
		{[]FilterComponent{{Type: TypeUser, MatchType: MatchExact}}, false, 0, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]FilterComponent{{Type: TypeUser, MatchType: 7}}, false, 0, "Unknown match type 7"},
		{[]FilterComponent{{Type: TypeUser, MatchType: 1}, {Type: TypeUser, MatchType: 1}}, false, 0, "Entity type user cannot appear more than once in the filter."},
		{[]FilterComponent{{Type: TypeIP, MatchType: 2}, {Type: TypeUser, MatchType: 2}}, false, 0, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
	} {
		got, err := cfg.Describe(tc.comps, tc.strict)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != tc.err || len(got) != tc.want {
			t.Errorf("%+v strict=%v: %d entries, err %q; want %d, %q", tc.comps, tc.strict, len(got), msg, tc.want, tc.err)
		}
	}
}

// What one produce request pays for a quota it never reaches: one
// sensor lookup and record (go test -bench Record ./state/quota).
func BenchmarkRecordUnderQuota(b *testing.B) {
	s := NewSensors(Produce, DefaultWindow)
	s.SetConfig(NewConfig(map[Entity]map[string]float64{{ClientID: Named("bench")}: {ProducerByteRate: 1e12}}))
	now := int64(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if s.Record("ANONYMOUS", "bench", 1e5, now) != 0 {
			b.Fatal("throttled")
		}
		now += int64(i & 1)
	}
}
