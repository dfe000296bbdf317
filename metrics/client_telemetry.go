package metrics

import (
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// ClientSeries is one metric a client pushed (KIP-714), for export.
type ClientSeries struct {
	InstanceID string
	ClientID   string
	Principal  string
	Name       string // the client's metric name (OTLP)
	Counter    bool   // a monotonic cumulative sum; else a gauge
	Labels     [][2]string
	Value      float64
}

// ClientTelemetrySource is what the broker reports of its KIP-714 clients.
type ClientTelemetrySource interface {
	ClientSeries() []ClientSeries
	ClientInstances() int
	DroppedClientSeries() int64
}

// RegisterClientTelemetry exports every series clients pushed, as
// kaas_client_<metric name with _ for . and other characters>, labelled
// with the client's instance id, client id and principal and the
// point's attributes.
func (m *Metrics) RegisterClientTelemetry(src ClientTelemetrySource) {
	m.Registry.MustRegister(&clientTelemetryCollector{src: src})
}

var (
	clientInstances = prometheus.NewDesc("kaas_client_metrics_instances",
		"KIP-714 client instances the broker tracks (Apache's client-metrics instance-count).", nil, nil)
	clientSeriesDropped = prometheus.NewDesc("kaas_client_metrics_series_dropped_total",
		"Series clients pushed that were not kept: over the per-client or total bound, or histograms and summaries.", nil, nil)
)

type clientTelemetryCollector struct{ src ClientTelemetrySource }

// Describe sends nothing: the families depend on what clients push
// (an unchecked collector).
func (c *clientTelemetryCollector) Describe(chan<- *prometheus.Desc) {}

func (c *clientTelemetryCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(clientInstances, prometheus.GaugeValue, float64(c.src.ClientInstances()))
	ch <- prometheus.MustNewConstMetric(clientSeriesDropped, prometheus.CounterValue, float64(c.src.DroppedClientSeries()))
	// One family per name and kind; every series of a family gets the
	// union of the family's label names (Prometheus requires one set),
	// "" where a point had no such attribute.
	type family struct {
		name    string
		counter bool
		labels  map[string]bool
		series  []ClientSeries
	}
	fams := map[string]*family{}
	for _, s := range c.src.ClientSeries() {
		name := "kaas_client_" + PromName(s.Name)
		if s.Counter && !strings.HasSuffix(name, "_total") {
			name += "_total"
		}
		f := fams[name]
		if f == nil {
			f = &family{name: name, counter: s.Counter, labels: map[string]bool{}}
			fams[name] = f
		}
		if f.counter != s.Counter {
			continue // a name pushed as both kinds: the first kind seen wins
		}
		for _, l := range s.Labels {
			f.labels[attrLabel(l[0])] = true
		}
		f.series = append(f.series, s)
	}
	for _, f := range fams {
		names := []string{"client_instance_id", "client_id", "principal"}
		var extra []string
		for n := range f.labels {
			extra = append(extra, n)
		}
		sort.Strings(extra)
		names = append(names, extra...)
		desc := prometheus.NewDesc(f.name, "A metric KIP-714 clients pushed to the broker.", names, nil)
		seen := map[string]bool{}
		for _, s := range f.series {
			values := make([]string, len(names))
			values[0], values[1], values[2] = s.InstanceID, s.ClientID, s.Principal
			for _, l := range s.Labels {
				for i, n := range names[3:] {
					if n == attrLabel(l[0]) {
						values[3+i] = l[1]
					}
				}
			}
			key := strings.Join(values, "\x00")
			if seen[key] {
				continue // two points with the same labels: the first wins
			}
			seen[key] = true
			vt := prometheus.GaugeValue
			if f.counter {
				vt = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(desc, vt, s.Value, values...)
		}
	}
}

// attrLabel is a point attribute's label name: its Prometheus form,
// prefixed so it cannot collide with the client's own labels.
func attrLabel(name string) string { return "attr_" + PromName(name) }

// PromName turns a metric or attribute name into a valid Prometheus
// name: every character other than letters, digits and _ becomes _.
func PromName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}
