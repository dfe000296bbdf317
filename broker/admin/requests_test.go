package admin

import (
	"math"
	"testing"
)

// Percentiles between two cumulative snapshots interpolate within the
// bucket the rank falls in, as Prometheus's histogram_quantile does.
func TestQuantileBetweenSnapshots(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, math.Inf(1)}
	from := []float64{5, 5, 5, 5} // five requests before the window
	for _, c := range []struct {
		name string
		to   []float64
		q    float64
		want float64
	}{
		{"all in the first bucket", []float64{15, 15, 15, 15}, 0.5, 0.0005},
		{"rank in the second bucket", []float64{5, 15, 15, 15}, 0.5, 0.0055},
		{"p99 past the last bound", []float64{5, 5, 6, 105}, 0.99, 0.1},
		{"no requests in the window", []float64{5, 5, 5, 5}, 0.5, math.NaN()},
	} {
		got := quantile(c.q, bounds, from, c.to)
		if math.IsNaN(c.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-c.want) > 1e-9) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
