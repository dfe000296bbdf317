package broker

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/clientmetrics"
)

func init() {
	register(api{key: 72, min: 0, max: 0, serve: servePushTelemetry, fail: failPushTelemetry})
}

// servePushTelemetry serves PushTelemetry (key 72), version 0 (KIP-714).
//
// Checks a push as Apache's ClientMetricsManager, in its order: a zero
// or reserved instance id, or a push after one that said terminating →
// INVALID_REQUEST; sooner than the push interval (a push right after a
// GetTelemetrySubscriptions, or a terminating one, is let through) →
// THROTTLING_QUOTA_EXCEEDED; a subscription id that is not the
// instance's current one → UNKNOWN_SUBSCRIPTION_ID; an unknown
// compression type → UNSUPPORTED_COMPRESSION_TYPE; a payload over
// telemetry.max.bytes → TELEMETRY_TOO_LARGE. The payload is then inflated
// (at most 16 MiB) and decoded as OTLP MetricsData; one that does not
// decode → INVALID_RECORD, and nothing of it is kept. The points of its
// gauges and sums replace the instance's series on /metrics
// (kaas_client_*), at most 500 per client and 20000 in all; the rest is
// counted in kaas_client_metrics_series_dropped_total.
func servePushTelemetry(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.PushTelemetryRequest)
	resp := req.ResponseKind().(*kmsg.PushTelemetryResponse)
	push := clientmetrics.Push{ID: clientmetrics.UUID(req.ClientInstanceID), SubscriptionID: req.SubscriptionID,
		Terminating: req.Terminating, Compression: req.CompressionType, Metrics: req.Metrics}
	err := b.telemetry.mgr.Push(push, telemetryClient(c), c.Session().Principal(), time.Now().UnixMilli(), decodeTelemetry)
	var r *clientmetrics.Refusal
	if errors.As(err, &r) {
		resp.ErrorCode = r.Code
		b.log.Info("push telemetry refused", "client", c.ClientID, "remote", c.Remote, "reason", r.Msg)
	}
	return resp
}

func failPushTelemetry(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.PushTelemetryResponse)
	resp.ErrorCode = code
	return resp
}
