package clientmetrics

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	colmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// Bounds on the series kept.
const (
	// MaxSeriesPerClient bounds what one push keeps; the rest of a push
	// is dropped (and counted).
	MaxSeriesPerClient = 500
	// MaxSeries bounds the series of every client together.
	MaxSeries = 20000
	// maxLabels bounds one point's attributes, maxLabelBytes the length
	// of a label value kept.
	maxLabels     = 8
	maxLabelBytes = 256
)

// Kind is how a series is exported.
type Kind int

const (
	Gauge   Kind = iota // an OTLP gauge, or a sum that is not monotonic
	Counter             // a monotonic cumulative sum
)

// Label is one attribute of a point.
type Label struct{ Name, Value string }

// Series is one data point of a pushed metric, as kept for export.
type Series struct {
	Name   string // the OTLP metric name
	Kind   Kind
	Labels []Label // sorted by name
	Value  float64
}

// Decode unmarshals an OTLP MetricsData payload (already decompressed)
// into at most MaxSeriesPerClient series; dropped counts the rest.
// Number points of gauges and sums are kept; histograms and summaries
// are counted as dropped (KIP-714's standard client metrics have none).
func Decode(payload []byte) (series []Series, dropped int, err error) {
	var md colmetrics.MetricsData
	if err := proto.Unmarshal(payload, &md); err != nil {
		return nil, 0, fmt.Errorf("not an OTLP MetricsData message: %w", err)
	}
	for _, rm := range md.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				kind := Gauge
				var points []*colmetrics.NumberDataPoint
				switch {
				case m.GetGauge() != nil:
					points = m.GetGauge().GetDataPoints()
				case m.GetSum() != nil:
					points = m.GetSum().GetDataPoints()
					if m.GetSum().GetIsMonotonic() && m.GetSum().GetAggregationTemporality() == colmetrics.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
						kind = Counter
					}
				default:
					dropped++
					continue
				}
				if m.GetName() == "" {
					return nil, 0, errors.New("a metric without a name")
				}
				for _, p := range points {
					if len(series) >= MaxSeriesPerClient {
						dropped++
						continue
					}
					v := p.GetAsDouble()
					if _, isInt := p.GetValue().(*colmetrics.NumberDataPoint_AsInt); isInt {
						v = float64(p.GetAsInt())
					}
					series = append(series, Series{Name: m.GetName(), Kind: kind, Labels: labels(p), Value: v})
				}
			}
		}
	}
	return series, dropped, nil
}

func labels(p *colmetrics.NumberDataPoint) []Label {
	var out []Label
	for _, kv := range p.GetAttributes() {
		if len(out) >= maxLabels {
			break
		}
		var s string
		switch x := kv.GetValue().GetValue().(type) {
		case *common.AnyValue_StringValue:
			s = x.StringValue
		case *common.AnyValue_IntValue:
			s = strconv.FormatInt(x.IntValue, 10)
		case *common.AnyValue_DoubleValue:
			s = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		case *common.AnyValue_BoolValue:
			s = strconv.FormatBool(x.BoolValue)
		}
		out = append(out, Label{Name: kv.GetKey(), Value: Truncate(s)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Truncate bounds a label value kept from a client.
func Truncate(s string) string {
	if len(s) > maxLabelBytes {
		return s[:maxLabelBytes]
	}
	return s
}
