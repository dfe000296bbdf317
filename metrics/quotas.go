package metrics

import "github.com/prometheus/client_golang/prometheus"

// QuotaSample is one client quota sensor at scrape time (Apache's
// per-user/client-id quota metrics). User and ClientID are the sensor's
// tags: empty for a level the matching quota does not name.
type QuotaSample struct {
	Quota    string // produce, fetch, request, controller_mutation
	User     string
	ClientID string
	Limit    float64 // the quota; Limited false: none applies
	Limited  bool
	// Rate: bytes/s (produce, fetch), percent of one thread's time
	// (request), partitions mutated per second (controller_mutation).
	Rate float64
	// Tokens left in the controller mutation quota's bucket.
	Tokens float64
	// ThrottleAvgSeconds is Apache's throttle-time: the average throttle
	// over the quota window.
	ThrottleAvgSeconds float64
	Throttles          int64
	ThrottledSeconds   float64
}

// RegisterQuotas exports every quota sensor src lists at scrape time.
func (m *Metrics) RegisterQuotas(src func() []QuotaSample) {
	m.Registry.MustRegister(&quotaCollector{src: src})
}

var quotaLabels = []string{"quota", "user", "client_id"}

var (
	quotaByteRate = prometheus.NewDesc("kaas_quota_byte_rate",
		"Bytes per second a quota entity produced or fetched, over the quota window (Apache's byte-rate); quota is produce or fetch.", quotaLabels, nil)
	quotaRequestTime = prometheus.NewDesc("kaas_quota_request_time_percent",
		"Percent of one thread's time the broker spent on a quota entity's requests, over the quota window (Apache's request-time).", quotaLabels, nil)
	quotaMutationRate = prometheus.NewDesc("kaas_quota_mutation_rate",
		"Partitions created or deleted per second by a quota entity (Apache's mutation-rate).", quotaLabels, nil)
	quotaTokens = prometheus.NewDesc("kaas_quota_tokens",
		"Tokens left in a quota entity's controller mutation bucket (Apache's tokens); below 0 its mutations are refused.", quotaLabels, nil)
	quotaLimit = prometheus.NewDesc("kaas_quota_limit",
		"The quota that applies to the entity: bytes/s, percent or mutations/s by quota.", quotaLabels, nil)
	quotaThrottleTime = prometheus.NewDesc("kaas_quota_throttle_time_seconds",
		"Average throttle time of a quota entity's throttled responses over the quota window (Apache's throttle-time).", quotaLabels, nil)
	quotaThrottles = prometheus.NewDesc("kaas_quota_throttles_total",
		"Responses that throttled a quota entity.", quotaLabels, nil)
	quotaThrottled = prometheus.NewDesc("kaas_quota_throttled_seconds_total",
		"Throttle time given to a quota entity's responses, summed.", quotaLabels, nil)
)

type quotaCollector struct{ src func() []QuotaSample }

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{quotaByteRate, quotaRequestTime, quotaMutationRate, quotaTokens, quotaLimit, quotaThrottleTime, quotaThrottles, quotaThrottled} {
		ch <- d
	}
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src() {
		l := []string{s.Quota, s.User, s.ClientID}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
		}
		switch s.Quota {
		case "produce", "fetch":
			gauge(quotaByteRate, s.Rate)
		case "request":
			gauge(quotaRequestTime, s.Rate)
		case "controller_mutation":
			gauge(quotaMutationRate, s.Rate)
			if s.Limited {
				gauge(quotaTokens, s.Tokens)
			}
		}
		if s.Limited {
			gauge(quotaLimit, s.Limit)
		}
		gauge(quotaThrottleTime, s.ThrottleAvgSeconds)
		ch <- prometheus.MustNewConstMetric(quotaThrottles, prometheus.CounterValue, float64(s.Throttles), l...)
		ch <- prometheus.MustNewConstMetric(quotaThrottled, prometheus.CounterValue, s.ThrottledSeconds, l...)
	}
}
