package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// StateCounts is a gauge per state (transactions by state, groups by
// state) read from a callback at scrape time, so the actors that own the
// states keep no metric of their own: they publish their counts (an
// atomic, a snapshot) and SetSource reads them. Until a source is set the
// metric reports nothing.
type StateCounts struct {
	desc *prometheus.Desc
	src  atomic.Pointer[func() map[string]int]
}

// NewStateCounts describes a gauge named name with one label, label.
func NewStateCounts(name, help, label string) *StateCounts {
	return &StateCounts{desc: prometheus.NewDesc(name, help, []string{label}, nil)}
}

// SetSource installs (or replaces) the callback; it must not block.
func (s *StateCounts) SetSource(fn func() map[string]int) { s.src.Store(&fn) }

func (s *StateCounts) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *StateCounts) Collect(ch chan<- prometheus.Metric) {
	src := s.src.Load()
	if src == nil {
		return
	}
	for state, n := range (*src)() {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(n), state)
	}
}

// RegisterStateCounts adds another state-count gauge to the registry (for
// actor kinds that arrive later). It panics on a duplicate name, like
// MustRegister.
func (m *Metrics) RegisterStateCounts(name, help, label string) *StateCounts {
	s := NewStateCounts(name, help, label)
	m.register(s)
	return s
}
