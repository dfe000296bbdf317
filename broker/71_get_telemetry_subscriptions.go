package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/clientmetrics"
)

func init() {
	register(api{key: 71, min: 0, max: 0, serve: serveGetTelemetrySubscriptions, fail: failGetTelemetrySubscriptions})
}

// serveGetTelemetrySubscriptions serves GetTelemetrySubscriptions (key 71),
// version 0 (KIP-714).
//
// Answers a client (a new one, with the zero instance id, is given a new
// one) with the subscription computed from every CLIENT_METRICS resource
// that matches it — the union of their metric prefixes ("*": all), the
// shortest interval (default 5 minutes) — the compression types a push
// may use (zstd, lz4, gzip, snappy, in Apache's order) and
// telemetry.max.bytes. A request sooner than the push interval after the
// client's last request is THROTTLING_QUOTA_EXCEEDED, as Apache's
// ClientMetricsManager. Unlike Apache, kaas asks for cumulative sums
// (DeltaTemporality false): it exports them to Prometheus, whose
// counters are cumulative. Instances are bounded (16384, least recently
// seen dropped) and forgotten once unseen for max(1 minute, 3 intervals).
func serveGetTelemetrySubscriptions(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.GetTelemetrySubscriptionsRequest)
	resp := req.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	sub, err := b.telemetry.mgr.Get(clientmetrics.UUID(req.ClientInstanceID), telemetryClient(c), c.Session().Principal(), time.Now().UnixMilli())
	var r *clientmetrics.Refusal
	if errors.As(err, &r) {
		resp.ErrorCode = r.Code
		b.log.Debug("get telemetry subscriptions refused", "client", c.ClientID, "reason", r.Msg)
		return resp
	}
	resp.ClientInstanceID = sub.ID
	resp.SubscriptionID = sub.SubscriptionID
	resp.AcceptedCompressionTypes = clientmetrics.AcceptedCompression
	resp.PushIntervalMillis = int32(sub.IntervalMs)
	resp.TelemetryMaxBytes = int32(b.cfg.TelemetryMaxBytes)
	resp.DeltaTemporality = false
	resp.RequestedMetrics = sub.Metrics
	if resp.RequestedMetrics == nil {
		resp.RequestedMetrics = []string{}
	}
	return resp
}

func failGetTelemetrySubscriptions(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	resp.ErrorCode = code
	return resp
}
