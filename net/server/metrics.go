package server

import (
	"time"

	"kaas/metrics"
)

// netMetrics records the front end's measurements; with no registry it
// records nothing.
type netMetrics struct{ m *metrics.Metrics }

func (n netMetrics) open(d int) {
	if n.m != nil {
		n.m.Connections.Add(float64(d))
	}
}

func (n netMetrics) refused(reason string) {
	if n.m != nil {
		n.m.ConnectionsRefused.WithLabelValues(reason).Inc()
	}
}

func (n netMetrics) afterPeerClose(requests int) {
	if n.m != nil && requests > 0 {
		n.m.RequestsAfterPeerClose.Add(float64(requests))
	}
}

func (n netMetrics) closedBy(reason string) {
	if n.m != nil {
		n.m.ConnectionsClosed.WithLabelValues(reason).Inc()
	}
}

func (n netMetrics) acceptError(errno string) {
	if n.m != nil {
		n.m.AcceptErrors.WithLabelValues(errno).Inc()
	}
}

func (n netMetrics) acceptWaits() {
	if n.m != nil {
		n.m.AcceptWaits.Inc()
	}
}

func (n netMetrics) queued(d int64) {
	if n.m != nil {
		n.m.QueuedRequestBytes.Add(float64(d))
	}
}

func (n netMetrics) paused(d int) {
	if n.m != nil {
		n.m.PausedConnections.Add(float64(d))
	}
}

// answerWrite counts an answer by how it was written: direct bytes went
// straight to the socket, queued bytes through the event loop.
func (n netMetrics) answerWrite(direct, queued bool) {
	if n.m == nil {
		return
	}
	switch {
	case !queued:
		n.m.AnswerWritesDirect.Inc()
	case direct:
		n.m.AnswerWritesSplit.Inc()
	default:
		n.m.AnswerWritesLoop.Inc()
	}
}

func (n netMetrics) serve(key int16, d time.Duration) {
	if n.m != nil {
		n.m.LoopServe(key).Observe(d.Seconds())
	}
}
