package bench

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Hist is a latency histogram safe for concurrent Record calls (one
// atomic add each, no lock, no allocation). Buckets are log-linear: 32
// sub-buckets per power of two, so a percentile is within about 3% of the
// true value, from 1 ns to hours.
type Hist struct {
	counts [histBuckets]atomic.Int64
}

const (
	subBits     = 5
	subCount    = 1 << subBits // 32
	histBuckets = 2*subCount + 40*subCount
)

func bucketOf(ns int64) int {
	if ns < 0 {
		ns = 0
	}
	v := uint64(ns)
	m := bits.Len64(v)
	if m <= subBits+1 { // v < 64: exact
		return int(v)
	}
	shift := m - (subBits + 1)
	top := v >> shift // in [32, 64)
	i := 2*subCount + (shift-1)*subCount + int(top-subCount)
	if i >= histBuckets {
		return histBuckets - 1
	}
	return i
}

// bucketValue is the midpoint of bucket i, in nanoseconds.
func bucketValue(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	j := i - 2*subCount
	shift := j/subCount + 1
	top := uint64(j%subCount + subCount)
	return int64(top<<shift + (1<<shift)/2)
}

// Record adds one latency.
func (h *Hist) Record(d time.Duration) { h.counts[bucketOf(int64(d))].Add(1) }

// Snapshot is a point-in-time copy of a Hist; differences of snapshots
// give the histogram of an interval.
type Snapshot [histBuckets]int64

// Snapshot copies the counts.
func (h *Hist) Snapshot() *Snapshot {
	var s Snapshot
	for i := range h.counts {
		s[i] = h.counts[i].Load()
	}
	return &s
}

// Minus returns s - prev (the interval between them).
func (s *Snapshot) Minus(prev *Snapshot) *Snapshot {
	out := *s
	if prev != nil {
		for i := range out {
			out[i] -= prev[i]
		}
	}
	return &out
}

// Count is the number of recorded values.
func (s *Snapshot) Count() int64 {
	var n int64
	for _, c := range s {
		n += c
	}
	return n
}

// Quantile returns the q-quantile (0 < q <= 1), or 0 when empty.
func (s *Snapshot) Quantile(q float64) time.Duration {
	total := s.Count()
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.5)
	if rank < 1 {
		rank = 1
	}
	var seen int64
	for i, c := range s {
		seen += c
		if seen >= rank {
			return time.Duration(bucketValue(i))
		}
	}
	return time.Duration(bucketValue(histBuckets - 1))
}
