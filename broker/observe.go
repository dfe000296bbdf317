package broker

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/partition"
	"kaas/metrics"
	"kaas/net/server"
)

// answered records request metrics for every answer.
func (b *Broker) answered(c *server.Call, resp kmsg.Response) {
	name := kmsg.NameForKey(c.Key)
	v := strconv.Itoa(int(c.Version))
	b.metrics.Requests.WithLabelValues(name, v).Inc()
	b.metrics.RequestDuration.WithLabelValues(name, v).Observe(time.Since(c.Received).Seconds())
	if resp == nil {
		return
	}
	eachErrorCode(resp, func(code int16) {
		b.metrics.RequestErrors.WithLabelValues(name, errorName(code)).Inc()
	})
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		b.observeFetch(f)
	}
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
