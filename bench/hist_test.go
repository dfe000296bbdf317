package bench

import (
	"testing"
	"time"
)

func TestHistQuantilesWithinThreePercent(t *testing.T) {
	var h Hist
	// 1..10000 µs, uniformly: the q-quantile is q*10 ms.
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := h.Snapshot()
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := time.Duration(q * float64(10*time.Millisecond))
		got := s.Quantile(q)
		if d := float64(got-want) / float64(want); d > 0.03 || d < -0.03 {
			t.Errorf("p%v = %v, want %v within 3%%", q*100, got, want)
		}
	}
	if s.Count() != 10000 {
		t.Errorf("count %d", s.Count())
	}
	var empty Hist
	if empty.Snapshot().Quantile(0.99) != 0 {
		t.Error("empty histogram has a quantile")
	}
}

func TestHistBucketsAreMonotonic(t *testing.T) {
	prev := -1
	for ns := int64(0); ns < int64(time.Hour); ns = ns*11/10 + 1 {
		b := bucketOf(ns)
		if b < prev {
			t.Fatalf("bucket of %d is %d, below %d", ns, b, prev)
		}
		if v := bucketValue(b); ns > 64 && (float64(v) < float64(ns)*0.96 || float64(v) > float64(ns)*1.04) {
			t.Fatalf("bucket %d value %d for %d", b, v, ns)
		}
		prev = b
	}
}
