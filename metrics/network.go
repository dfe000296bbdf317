package metrics

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// network holds the front end's metrics: connection limits, accept
// errors, the request memory budget, paused connections and the time
// requests hold an event loop.
type network struct {
	ConnectionsRefused *prometheus.CounterVec // reason
	ConnectionsClosed  *prometheus.CounterVec // reason
	AcceptErrors       *prometheus.CounterVec // errno
	AcceptWaits        prometheus.Counter
	// RequestsAfterPeerClose counts requests served after their client
	// closed its connection (sent before the close, not yet read).
	RequestsAfterPeerClose prometheus.Counter
	QueuedRequestBytes     prometheus.Gauge
	PausedConnections      prometheus.Gauge
	// AnswerWrites by path: "direct" (written to the socket by the
	// goroutine that answered), "split" (begun so, the part the socket
	// did not take queued through the event loop) or "loop" (queued
	// through the event loop whole).
	AnswerWritesDirect prometheus.Counter
	AnswerWritesSplit  prometheus.Counter
	AnswerWritesLoop   prometheus.Counter

	loopServe *prometheus.HistogramVec // api
	// loopObs caches loopServe's child per API key (the hot path does no
	// label lookup); filled on first use.
	loopObs [128]atomic.Pointer[prometheus.Observer]
}

func (m *Metrics) newNetwork() {
	n := &m.network
	n.ConnectionsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_connections_refused_total",
		Help: "Connections closed as soon as accepted, by reason (max_connections_per_ip: max.connections.per.ip reached; register_failed: no event loop could take it)."}, []string{"reason"})
	n.ConnectionsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_connections_closed_by_broker_total",
		Help: "Connections the broker closed because of what the client sent or did not, by reason (oversized_frame, bad_frame, decode_limit, unread_overrun, idle: connections.max.idle.ms)."}, []string{"reason"})
	n.AcceptErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_accept_errors_total",
		Help: "Failed accepts (EMFILE: out of file descriptors, ENFILE, ...); accepting backs off and retries."}, []string{"errno"})
	n.AcceptWaits = prometheus.NewCounter(prometheus.CounterOpts{Name: "kaas_accept_waits_total",
		Help: "Times accepting paused because max.connections were open."})
	n.RequestsAfterPeerClose = prometheus.NewCounter(prometheus.CounterOpts{Name: "kaas_requests_after_peer_close_total",
		Help: "Requests served after their client closed the connection: sent before the close and not yet read then (a fire-and-forget acks=0 producer's last requests), served as Apache serves them, with no answer written."})
	n.QueuedRequestBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_queued_request_bytes",
		Help: "Request bytes held in memory (being read, waiting or being served), bounded by queued.max.request.bytes."})
	n.PausedConnections = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_connections_paused",
		Help: "Connections not being read because they wait for earlier answers or for request budget (TCP pushes back on the client)."})
	writes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_answer_writes_total",
		Help: "Answers handed to a plaintext connection, by path: direct (written to the socket whole by the goroutine that answered, no event-loop wake-up), split (begun so, and the part the socket did not take at once queued through the event loop, which copies it into its buffer) or loop (queued through the event loop whole: something was still queued there, or the socket took nothing)."}, []string{"path"})
	n.AnswerWritesDirect, n.AnswerWritesSplit, n.AnswerWritesLoop = writes.WithLabelValues("direct"), writes.WithLabelValues("split"), writes.WithLabelValues("loop")
	n.loopServe = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kaas_event_loop_serve_seconds",
		Help: "Time a request's handler held its network event loop, by API (handlers hand disk and coordinator work to others; this stays in microseconds).", Buckets: prometheus.ExponentialBuckets(1e-6, 4, 11)}, []string{"api"}) // 1 µs … 1 s
	for _, c := range []prometheus.Collector{n.ConnectionsRefused, n.ConnectionsClosed, n.AcceptErrors, n.AcceptWaits, n.RequestsAfterPeerClose, n.QueuedRequestBytes, n.PausedConnections, writes, n.loopServe} {
		m.register(c)
	}
}

// LoopServe is the event-loop histogram's child for an API key.
func (m *Metrics) LoopServe(key int16) prometheus.Observer {
	n := &m.network
	if key < 0 || int(key) >= len(n.loopObs) {
		return n.loopServe.WithLabelValues(strconv.Itoa(int(key)))
	}
	if o := n.loopObs[key].Load(); o != nil {
		return *o
	}
	o := n.loopServe.WithLabelValues(kmsg.NameForKey(key))
	n.loopObs[key].Store(&o)
	return o
}
