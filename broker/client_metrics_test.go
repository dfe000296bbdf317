package broker_test

// KIP-714 through the wire: a CLIENT_METRICS subscription set with
// IncrementalAlterConfigs, described and listed; a real franz-go client
// pushes its metrics and they appear on /metrics with its client id;
// every bad push and bad subscription gets Apache's code.

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	colmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"kaas/broker"
	"kaas/broker/admin"
	"kaas/broker/brokertest"
)

func alterClientMetrics(t *testing.T, cl *kgo.Client, name string, configs map[string]string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeClientMetrics, name
	for k, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(brokertest.Context(t, 30*time.Second), cl)
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	if m := resp.Resources[0].ErrorMessage; m != nil {
		msg = *m
	}
	return resp.Resources[0].ErrorCode, msg
}

// clientSeries finds the kaas_client_* samples labelled client_id=id.
func clientSeries(t *testing.T, gather func() ([]string, error), id string) []string {
	t.Helper()
	names, err := gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.Contains(n, `client_id="`+id+`"`) {
			out = append(out, n)
		}
	}
	return out
}

func TestClientMetricsThroughTheWire(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.StartIn(t, dir)
	admin := brokertest.Client(t, b.Addr(), kgo.ClientID("operator"))
	if code, msg := alterClientMetrics(t, admin, "franz", map[string]string{
		"metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_id=telemetry-app"}); code != 0 {
		t.Fatalf("setting the subscription: %d %s", code, msg)
	}
	// Described with its configs; listed.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeClientMetrics, "franz"
	dreq.Resources = append(dreq.Resources, dr)
	described, err := dreq.RequestWith(brokertest.Context(t, 30*time.Second), admin)
	if err != nil || described.Resources[0].ErrorCode != 0 || len(described.Resources[0].Configs) != 3 {
		t.Fatalf("describe: %v %+v", err, described)
	}
	for _, c := range described.Resources[0].Configs {
		if c.Source != kmsg.ConfigSourceClientMetricsConfig || c.Value == nil {
			t.Fatalf("described config %+v", c)
		}
	}
	lreq := kmsg.NewPtrListConfigResourcesRequest()
	lreq.ResourceTypes = []int8{int8(kmsg.ConfigResourceTypeClientMetrics)}
	lr, err := lreq.RequestWith(brokertest.Context(t, 30*time.Second), admin)
	if err != nil || len(lr.ConfigResources) != 1 || lr.ConfigResources[0].Name != "franz" {
		t.Fatalf("list config resources: %v %+v", err, lr)
	}

	// A real client pushes; its metrics show on /metrics with its id.
	brokertest.CreateTopic(t, b.Addr(), "telemetry", 1, nil)
	app := brokertest.Client(t, b.Addr(), kgo.ClientID("telemetry-app"), kgo.DefaultProduceTopic("telemetry"))
	if err := app.ProduceSync(brokertest.Context(t, 30*time.Second), kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	gather := func() ([]string, error) {
		fams, err := b.Metrics().Registry.Gather()
		var out []string
		for _, f := range fams {
			if !strings.HasPrefix(f.GetName(), "kaas_client_org_apache_kafka_producer_") {
				continue
			}
			for _, m := range f.Metric {
				s := f.GetName()
				for _, l := range m.Label {
					s += " " + l.GetName() + `="` + l.GetValue() + `"`
				}
				out = append(out, s)
			}
		}
		return out, err
	}
	brokertest.Eventually(t, 30*time.Second, "the client's pushed metrics on /metrics", func() bool {
		return len(clientSeries(t, gather, "telemetry-app")) > 0
	})
	if got := clientSeries(t, gather, "operator"); len(got) != 0 {
		t.Fatalf("a client the subscription does not match pushed: %v", got)
	}
	if !strings.Contains(clientSeries(t, gather, "telemetry-app")[0], `principal="User:ANONYMOUS"`) {
		t.Fatalf("no principal label: %v", clientSeries(t, gather, "telemetry-app"))
	}
	// Durable: the subscription survives a restart.
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	lr, err = lreq.RequestWith(brokertest.Context(t, 30*time.Second), brokertest.Client(t, b.Addr()))
	if err != nil || len(lr.ConfigResources) != 1 || lr.ConfigResources[0].Name != "franz" {
		t.Fatalf("after a restart: %v %+v", err, lr)
	}
}

func TestClientMetricsBadInput(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.TelemetryMaxBytes = 1024 }))
	cl := brokertest.Client(t, b.Addr(), kgo.DisableClientMetrics())
	for _, tc := range []struct {
		configs map[string]string
		code    int16
		msg     string
	}{
		{map[string]string{"colour": "red"}, kerr.InvalidRequest.Code, "Unknown client metrics configuration: colour"},
		{map[string]string{"interval.ms": "10"}, kerr.InvalidRequest.Code, "Invalid value 10 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{map[string]string{"match": "client_id"}, kerr.InvalidConfig.Code, "Illegal client matching pattern: client_id"},
	} {
		if code, msg := alterClientMetrics(t, cl, "bad", tc.configs); code != tc.code || msg != tc.msg {
			t.Errorf("%v: %d %q, want %d %q", tc.configs, code, msg, tc.code, tc.msg)
		}
	}
	if code, _ := alterClientMetrics(t, cl, "all", map[string]string{"metrics": "*", "interval.ms": "100000"}); code != 0 {
		t.Fatalf("subscription: %d", code)
	}
	ctx := brokertest.Context(t, 60*time.Second)
	get := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	sub, err := get.RequestWith(ctx, cl)
	if err != nil || sub.ErrorCode != 0 || len(sub.RequestedMetrics) != 1 || sub.RequestedMetrics[0] != "*" || sub.TelemetryMaxBytes != 1024 {
		t.Fatalf("get: %v %+v", err, sub)
	}
	again := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	again.ClientInstanceID = sub.ClientInstanceID
	if r, err := again.RequestWith(ctx, cl); err != nil || r.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("a second get before the interval: %v %+v", err, r)
	}
	push := func(mut func(*kmsg.PushTelemetryRequest)) int16 {
		t.Helper()
		p := kmsg.NewPtrPushTelemetryRequest()
		p.ClientInstanceID, p.SubscriptionID = sub.ClientInstanceID, sub.SubscriptionID
		mut(p)
		r, err := p.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r.ErrorCode
	}
	// Order matters: the first push after the get is let through the
	// interval; each later one is too early, unless terminating.
	good, _ := proto.Marshal(&colmetrics.MetricsData{})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(good)
	_ = w.Close()
	if c := push(func(p *kmsg.PushTelemetryRequest) { p.Metrics, p.CompressionType = gz.Bytes(), 1 }); c != 0 {
		t.Fatalf("a gzip push right after the get: %d", c)
	}
	if c := push(func(p *kmsg.PushTelemetryRequest) {}); c != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("a push before the interval: %d", c)
	}
	// A new client (no Get) with a made-up subscription id.
	stranger := [16]byte{9, 9, 9}
	if c := push(func(p *kmsg.PushTelemetryRequest) { p.ClientInstanceID, p.SubscriptionID = stranger, 12345 }); c != kerr.UnknownSubscriptionID.Code {
		t.Fatalf("a push without a subscription: %d", c)
	}
	fresh := func() *kmsg.GetTelemetrySubscriptionsResponse {
		r, err := kmsg.NewPtrGetTelemetrySubscriptionsRequest().RequestWith(ctx, cl)
		if err != nil || r.ErrorCode != 0 {
			t.Fatalf("get: %v %+v", err, r)
		}
		return r
	}
	for _, tc := range []struct {
		what string
		mut  func(*kmsg.PushTelemetryRequest)
		code int16
	}{
		{"oversized", func(p *kmsg.PushTelemetryRequest) { p.Metrics = make([]byte, 1025) }, kerr.TelemetryTooLarge.Code},
		{"unknown compression", func(p *kmsg.PushTelemetryRequest) { p.CompressionType = 7; p.Metrics = good }, kerr.UnsupportedCompressionType.Code},
		{"malformed OTLP", func(p *kmsg.PushTelemetryRequest) { p.Metrics = []byte{0xff, 0xff, 0xff, 0xff} }, kerr.InvalidRecord.Code},
		{"malformed gzip", func(p *kmsg.PushTelemetryRequest) { p.Metrics, p.CompressionType = []byte("not gzip"), 1 }, kerr.InvalidRecord.Code},
		{"zero instance id", func(p *kmsg.PushTelemetryRequest) { p.ClientInstanceID = [16]byte{} }, kerr.InvalidRequest.Code},
	} {
		s := fresh()
		c := push(func(p *kmsg.PushTelemetryRequest) {
			p.ClientInstanceID, p.SubscriptionID = s.ClientInstanceID, s.SubscriptionID
			tc.mut(p)
		})
		if c != tc.code {
			t.Errorf("%s: code %d, want %d", tc.what, c, tc.code)
		}
	}
	// Terminating, then anything more is INVALID_REQUEST.
	s := fresh()
	term := func(p *kmsg.PushTelemetryRequest) {
		p.ClientInstanceID, p.SubscriptionID, p.Terminating = s.ClientInstanceID, s.SubscriptionID, true
	}
	if c := push(term); c != 0 {
		t.Fatalf("terminating push: %d", c)
	}
	if c := push(term); c != kerr.InvalidRequest.Code {
		t.Fatalf("a push after terminating: %d", c)
	}
}

// The inspector's overview lists quota entities, quota sensors and the
// client instances pushing metrics.
func TestInspectorShowsQuotasAndClientMetrics(t *testing.T) {
	b := startObservedBroker(t)
	cl := brokertest.Client(t, b.Addr(), kgo.ClientID("watched"))
	alterQuotas(t, kadm.NewClient(cl), kadm.AlterClientQuotaEntry{Entity: quotaEntity("client-id", "watched"),
		Ops: []kadm.AlterClientQuotaOp{setQuota("request_percentage", 50)}})
	if code, msg := alterClientMetrics(t, cl, "everything", map[string]string{"metrics": "org.apache.kafka.", "interval.ms": "1000"}); code != 0 {
		t.Fatalf("subscription: %d %s", code, msg)
	}
	// franz-go starts its telemetry once it has something to report.
	brokertest.CreateTopic(t, b.Addr(), "watched", 1, nil)
	if err := cl.ProduceSync(brokertest.Context(t, 30*time.Second), &kgo.Record{Topic: "watched", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var o admin.Overview
	brokertest.Eventually(t, 30*time.Second, "the quota, its sensor and the client instance on the overview", func() bool {
		getJSON(t, "http://"+b.AdminAddr()+"/api/overview", &o)
		found := map[string]bool{}
		for _, p := range o.Panels {
			for _, r := range p.Rows {
				switch {
				case p.Title == "Client quotas" && r[0] == "client-id=watched" && r[1] == "request_percentage=50":
					found[p.Title] = true
				case p.Title == "Quota sensors" && r[0] == "request" && r[2] == "watched" && r[3] == "50":
					found[p.Title] = true
				case p.Title == "Client metrics (KIP-714)" && r[1] == "watched":
					found[p.Title] = true
				}
			}
		}
		return len(found) == 3
	})
}
