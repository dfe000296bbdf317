package broker

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/partition"
	"kaas/metrics"
	"kaas/net/server"
)

// answered records request metrics for every answer.
func (b *Broker) answered(c *server.Call, resp kmsg.Response) {
	rm := b.requestMetrics.get(b.metrics, c.Key, c.Version)
	rm.requests.Inc()
	rm.duration.Observe(time.Since(c.Received).Seconds())
	if resp == nil {
		return
	}
	eachErrorCode(resp, func(code int16) {
		b.metrics.RequestErrors.WithLabelValues(rm.name, errorName(code)).Inc()
	})
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		b.observeFetch(f)
	}
}

// requestMetrics holds each (API key, version)'s request counter and
// duration histogram once looked up: every answer counts itself, and the
// label lookup (two label hashes under the vector's lock, the version
// formatted) cost more than the counting.
type requestMetrics struct {
	byKey [maxAPIKey + 1][maxAPIVersion + 1]atomic.Pointer[apiMetrics]
}

// The largest key and version the table holds; others are looked up each
// time (none today: ApiVersions answers up to key 68).
const (
	maxAPIKey     = 127
	maxAPIVersion = 31
)

type apiMetrics struct {
	name     string
	requests prometheus.Counter
	duration prometheus.Observer
}

func (r *requestMetrics) get(m *metrics.Metrics, key, version int16) *apiMetrics {
	inTable := key >= 0 && key <= maxAPIKey && version >= 0 && version <= maxAPIVersion
	if inTable {
		if am := r.byKey[key][version].Load(); am != nil {
			return am
		}
	}
	name, v := kmsg.NameForKey(key), strconv.Itoa(int(version))
	am := &apiMetrics{name: name, requests: m.Requests.WithLabelValues(name, v), duration: m.RequestDuration.WithLabelValues(name, v)}
	if inTable {
		r.byKey[key][version].Store(am)
	}
	return am
}

// errorName is the Kafka name of an error code (TOPIC_ALREADY_EXISTS), the
// error label of kaas_request_errors_total.
func errorName(code int16) string {
	e := kerr.TypedErrorForCode(code)
	if e == nil || (e == kerr.UnknownServerError && code != kerr.UnknownServerError.Code) {
		return "ERROR_CODE_" + strconv.Itoa(int(code))
	}
	return e.Message
}

// eachErrorCode reports every non-zero error code of an answer (one per
// partition, resource or member that failed): hand-written walks for the
// hot paths, a cached reflective walk for the rest.
func eachErrorCode(resp kmsg.Response, fn func(int16)) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					fn(p.ErrorCode)
				}
			}
		}
	case *kmsg.FetchResponse:
		if r.ErrorCode != 0 {
			fn(r.ErrorCode)
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					fn(p.ErrorCode)
				}
			}
		}
	default:
		eachErrorCodeReflect(resp, fn)
	}
}

// partitionObserver feeds partition measurements into the metrics.
type partitionObserver struct{ m *metrics.Metrics }

var _ partition.Observer = partitionObserver{}

func (o partitionObserver) Appended(topic string, _ int32, records, bytes int) {
	o.m.BytesIn.WithLabelValues(topic).Add(float64(bytes))
	o.m.RecordsIn.WithLabelValues(topic).Add(float64(records))
	o.m.ProduceBatchBytes.Observe(float64(bytes))
}

// storageObserver counts disk failures and quarantined files.
type storageObserver struct{ m *metrics.Metrics }

func (o storageObserver) Failed(store string)      { o.m.StorageFailures.WithLabelValues(store).Inc() }
func (o storageObserver) Quarantined(store string) { o.m.QuarantinedFiles.WithLabelValues(store).Inc() }

func (o partitionObserver) Synced(d time.Duration, appends int) {
	o.m.Fsyncs.Inc()
	o.m.FsyncDuration.Observe(d.Seconds())
	o.m.GroupCommitAppends.Observe(float64(appends))
}
