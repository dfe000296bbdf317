package clientmetrics

import (
	"errors"
	"testing"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]string
		config  bool
		want    string
	}{
		{"", nil, false, "Subscription name can't be empty"},
		{"s", map[string]string{"colour": "red"}, false, "Unknown client metrics configuration: colour"},
		{"s", map[string]string{"interval.ms": "50"}, false, "Invalid value 50 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"s", map[string]string{"interval.ms": "soon"}, true, "Invalid value soon for configuration interval.ms: Not a number of type INT"},
		{"s", map[string]string{"match": "client_id"}, true, "Illegal client matching pattern: client_id"},
		{"s", map[string]string{"match": "colour=red"}, true, "Illegal client matching pattern: colour=red"},
		{"s", map[string]string{"match": "client_id=("}, true, "Illegal client matching pattern: client_id=("},
		{"s", map[string]string{"metrics": "org.apache.kafka.", "interval.ms": "1000", "match": "client_id=app.*"}, false, ""},
	} {
		_, err := Parse(tc.name, tc.configs)
		var e *Error
		got := ""
		if errors.As(err, &e) {
			got = e.Msg
			if e.Config != tc.config {
				t.Errorf("%v: config error %v, want %v", tc.configs, e.Config, tc.config)
			}
		}
		if got != tc.want {
			t.Errorf("%q %v: %q, want %q", tc.name, tc.configs, got, tc.want)
		}
	}
}

func noDecode([]byte, int8) ([]Series, int, error) { return nil, 0, nil }

// Apache's push interval enforcement: a Get, then a push at once, then
// pushes no sooner than the interval; a wrong subscription id, a bad
// compression, an oversized payload and a push after terminating each get
// their code.
func TestGetAndPush(t *testing.T) {
	m := NewManager(100)
	sub, err := Parse("s", map[string]string{"metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_id=app"})
	if err != nil {
		t.Fatal(err)
	}
	m.SetSubscriptions(map[string]Subscription{"s": sub})
	app := Client{ClientID: "app"}
	got, err := m.Get(UUID{}, app, "User:ANONYMOUS", 1_000_000)
	if err != nil || got.ID == (UUID{}) || got.IntervalMs != 1000 || len(got.Metrics) != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	// Another client is not matched: no metrics, the default interval.
	other, _ := m.Get(UUID{}, Client{ClientID: "other"}, "", 1_000_000)
	if len(other.Metrics) != 0 || other.IntervalMs != DefaultIntervalMs {
		t.Fatalf("unmatched client: %+v", other)
	}
	code := func(err error) int16 {
		var r *Refusal
		if errors.As(err, &r) {
			return r.Code
		}
		return 0
	}
	push := Push{ID: got.ID, SubscriptionID: got.SubscriptionID}
	if err := m.Push(push, app, "", 1_000_010, noDecode); err != nil {
		t.Fatalf("first push after get: %v", err)
	}
	if c := code(m.Push(push, app, "", 1_000_500, noDecode)); c != codeThrottlingQuotaExceeded {
		t.Fatalf("early push: code %d", c)
	}
	if _, err := m.Get(got.ID, app, "", 1_000_600); code(err) != codeThrottlingQuotaExceeded {
		t.Fatalf("early get: %v", err)
	}
	bad := push
	bad.SubscriptionID++
	if c := code(m.Push(bad, app, "", 1_001_100, noDecode)); c != codeUnknownSubscriptionID {
		t.Fatalf("wrong subscription id: code %d", c)
	}
	bad = push
	bad.Compression = 9
	if c := code(m.Push(bad, app, "", 1_002_200, noDecode)); c != codeUnsupportedCompression {
		t.Fatalf("bad compression: code %d", c)
	}
	bad = push
	bad.Metrics = make([]byte, 101)
	if c := code(m.Push(bad, app, "", 1_003_300, noDecode)); c != codeTelemetryTooLarge {
		t.Fatalf("too large: code %d", c)
	}
	bad = push
	bad.Metrics = []byte{1}
	if c := code(m.Push(bad, app, "", 1_004_400, func([]byte, int8) ([]Series, int, error) { return nil, 0, errors.New("no") })); c != codeInvalidRecord {
		t.Fatalf("undecodable: code %d", c)
	}
	term := push
	term.Terminating = true
	if err := m.Push(term, app, "", 1_004_500, noDecode); err != nil {
		t.Fatalf("terminating push (early is allowed): %v", err)
	}
	if c := code(m.Push(push, app, "", 1_009_000, noDecode)); c != codeInvalidRequest {
		t.Fatalf("push after terminating: code %d", c)
	}
	if c := code(m.Push(Push{}, app, "", 1_009_000, noDecode)); c != codeInvalidRequest {
		t.Fatalf("zero instance id: code %d", c)
	}
	// Instances expire.
	if n := m.Expire(1_000_000 + DefaultIntervalMs*3 + 1); n != 2 || m.Len() != 0 {
		t.Fatalf("expired %d, %d left", n, m.Len())
	}
}

// A push's OTLP payload decodes into series, gauges and cumulative sums,
// within the bounds.
func TestDecode(t *testing.T) {
	md := &colmetrics.MetricsData{ResourceMetrics: []*colmetrics.ResourceMetrics{{ScopeMetrics: []*colmetrics.ScopeMetrics{{Metrics: []*colmetrics.Metric{
		{Name: "org.apache.kafka.producer.record.queue.time.avg", Data: &colmetrics.Metric_Gauge{Gauge: &colmetrics.Gauge{DataPoints: []*colmetrics.NumberDataPoint{
			{Value: &colmetrics.NumberDataPoint_AsDouble{AsDouble: 1.5}, Attributes: []*common.KeyValue{{Key: "node_id", Value: &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: 3}}}}},
		}}}},
		{Name: "org.apache.kafka.producer.bytes", Data: &colmetrics.Metric_Sum{Sum: &colmetrics.Sum{IsMonotonic: true,
			AggregationTemporality: colmetrics.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE,
			DataPoints:             []*colmetrics.NumberDataPoint{{Value: &colmetrics.NumberDataPoint_AsInt{AsInt: 42}}}}}},
		{Name: "h", Data: &colmetrics.Metric_Histogram{Histogram: &colmetrics.Histogram{}}},
	}}}}}}
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	series, dropped, err := Decode(b)
	if err != nil || dropped != 1 || len(series) != 2 {
		t.Fatalf("decode: %+v dropped %d %v", series, dropped, err)
	}
	if s := series[0]; s.Kind != Gauge || s.Value != 1.5 || len(s.Labels) != 1 || s.Labels[0] != (Label{"node_id", "3"}) {
		t.Fatalf("gauge %+v", s)
	}
	if s := series[1]; s.Kind != Counter || s.Value != 42 {
		t.Fatalf("sum %+v", s)
	}
	if _, _, err := Decode([]byte{0xff, 0xff, 0xff}); err == nil {
		t.Fatal("garbage decoded")
	}
}
