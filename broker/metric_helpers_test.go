package broker_test

import (
	"testing"

	"kaas/broker"
)

// metric reads one sample from a broker's registry (no admin listener
// needed): the sample of family name whose labels include labels (name
// value pairs); counters, gauges and histogram counts. Missing: 0.
func metric(t testing.TB, b *broker.Broker, name string, labels ...string) float64 {
	t.Helper()
	fams, err := b.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.Label {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// parkedFetches is the number of fetches waiting for MinBytes.
func parkedFetches(b *broker.Broker) float64 {
	fams, _ := b.Metrics().Registry.Gather()
	for _, f := range fams {
		if f.GetName() == "kaas_fetches_waiting" {
			return f.Metric[0].GetGauge().GetValue()
		}
	}
	return 0
}
