package broker

// Client quotas (KIP-13, KIP-55, KIP-124, KIP-257, KIP-546, KIP-599), as
// Apache enforces them on each broker: every quota entity (user,
// client-id, both, with defaults) holds values for producer_byte_rate,
// consumer_byte_rate, request_percentage and controller_mutation_rate,
// stored durably (configstore's client-quotas.json on one broker; etcd's
// client-quotas/ keys in a cluster, applied live on every broker from the
// watch). Each quota kind has its own sensors (state/quota): a produce
// request's size, a fetch answer's size, the time a handler ran and the
// partitions a topic request creates or deletes are recorded on the
// client's sensor, and a rate above its quota throttles the client: the
// answer carries the throttle time and the connection is muted for it
// (server.Call.Throttle, KIP-219). Nothing here waits: sensors are
// arithmetic under a mutex each.

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/coord"
	"kaas/metrics"
	"kaas/net/server"
	"kaas/state/quota"
	"kaas/storage/configstore"
)

// entityStore is where entity configs (client quotas, client-metrics
// subscriptions) live: configstore.EntityStore on one broker,
// coord.EntityStore in a cluster.
type entityStore interface {
	// Load returns every entity and the store's revision (etcd's; 0 for
	// the file store).
	Load() (map[string]map[string]string, int64, error)
	Apply(entity string, set map[string]string, remove []string) error
	// ApplyIfUnchanged sets configs of several entities at once if the
	// store did not change after revision rev (Load's); false if it did.
	ApplyIfUnchanged(set map[string]map[string]string, rev int64) (bool, error)
}

// clientQuotas is the broker's quota state.
type clientQuotas struct {
	store entityStore
	// mu serialises alterations and the applying of cluster views.
	mu      sync.Mutex
	rev     int64 // etcd revision of the quotas applied (cluster)
	cfg     atomic.Pointer[quota.Config]
	sensors [len(quota.Kinds)]*quota.Sensors
	stop    chan struct{}
	done    chan struct{}
}

// openEntityStore opens namespace ns (coord.ClientQuotas or
// coord.ClientMetrics) of the entity config stores.
func (b *Broker) openEntityStore(ns string) (entityStore, error) {
	if b.cluster != nil {
		return b.cluster.Session().Entities(ns), nil
	}
	s, err := configstore.OpenStore(b.env, b.cfg.BrokerID)
	if err != nil {
		return nil, err
	}
	return s.Entities(ns), nil
}

// openQuotas loads the stored quotas and starts their sensors.
func (b *Broker) openQuotas() error {
	store, err := b.openEntityStore(coord.ClientQuotas)
	if err != nil {
		return err
	}
	w := quota.Window{Samples: b.cfg.QuotaWindowNum, WindowMs: b.cfg.QuotaWindowSize.Milliseconds()}
	if w.Samples < 1 {
		w.Samples = quota.DefaultWindow.Samples
	}
	if w.WindowMs < 1 {
		w.WindowMs = quota.DefaultWindow.WindowMs
	}
	q := &b.quotas
	q.store = store
	for _, k := range quota.Kinds {
		q.sensors[k] = quota.NewSensors(k, w)
	}
	if err := b.reloadQuotas(); err != nil {
		return err
	}
	b.metrics.RegisterQuotas(b.quotaSamples)
	return nil
}

// startExpiry starts the sweep of idle quota sensors and client-metrics
// instances (once both are open).
func (b *Broker) startExpiry() {
	q := &b.quotas
	q.stop, q.done = make(chan struct{}), make(chan struct{})
	go b.expireQuotaSensors()
}

// setQuotas publishes the quotas stored (entity key → key → value).
func (b *Broker) setQuotas(stored map[string]map[string]string) {
	cfg, bad := quota.FromStrings(stored)
	for _, k := range bad {
		b.log.Warn("ignoring a stored client quota that does not parse", "entity", k)
	}
	b.quotas.cfg.Store(cfg)
	for _, s := range b.quotas.sensors {
		s.SetConfig(cfg)
	}
}

// reloadQuotas publishes what the store holds now (after an alteration:
// the next request on the connection sees it, whatever the watch's lag).
func (b *Broker) reloadQuotas() error {
	stored, rev, err := b.quotas.store.Load()
	if err != nil {
		return err
	}
	b.quotas.rev = max(b.quotas.rev, rev)
	b.setQuotas(stored)
	return nil
}

// applyQuotaView re-applies the cluster's quotas after a change in etcd
// (any broker may have altered them), unless this broker has read newer
// ones itself.
func (b *Broker) applyQuotaView(v *coord.View) {
	b.quotas.mu.Lock()
	defer b.quotas.mu.Unlock()
	if v.Rev < b.quotas.rev {
		return
	}
	b.quotas.rev = v.Rev
	b.setQuotas(v.Entities[coord.ClientQuotas])
}

// expireQuotaSensors drops idle sensors, and client-metrics instances
// that stopped pushing, once a minute.
func (b *Broker) expireQuotaSensors() {
	q := &b.quotas
	defer close(q.done)
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case now := <-t.C:
			for _, s := range q.sensors {
				s.Expire(now.UnixMilli())
			}
			b.expireTelemetry(now)
		}
	}
}

func (b *Broker) stopQuotas() {
	if q := &b.quotas; q.stop != nil {
		close(q.stop)
		<-q.done
		q.stop = nil
	}
}

// quotaUser is the quota "user" of a call: its principal's name
// (User:alice → alice; ANONYMOUS without authentication).
func quotaUser(c *server.Call) string {
	p := c.Session().Principal()
	if i := strings.IndexByte(p, ':'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// recordBandwidth records a produce request's or fetch answer's bytes
// and throttles the call if its client is over its byte-rate quota; it
// returns the throttle time (0: within quota, or none applies).
func (b *Broker) recordBandwidth(k quota.Kind, c *server.Call, bytes int) time.Duration {
	s := b.quotas.sensors[k]
	if !s.Enabled() {
		return 0
	}
	user, now := quotaUser(c), time.Now().UnixMilli()
	ms := s.Record(user, c.ClientID, float64(bytes), now)
	if ms > 0 {
		s.Throttled(user, c.ClientID, ms, now)
	}
	return time.Duration(ms) * time.Millisecond
}

// chargeRequest records the time a handler ran for c on the request
// quota (ClientRequestQuotaManager) and throttles the call if its client
// is over it. Apache counts its request handler and network threads'
// time; kaas counts the handler's own run, on the event loop or its
// goroutine, not time waiting for the disk, a peer or a long poll.
// Broker-to-broker requests and acks=0 produce are exempt, as in Apache.
func (b *Broker) chargeRequest(c *server.Call, ran time.Duration) {
	s := b.quotas.sensors[quota.Request]
	if !s.Enabled() || requestQuotaExempt(c) {
		return
	}
	user, now := quotaUser(c), time.Now().UnixMilli()
	ms := s.Record(user, c.ClientID, float64(ran.Nanoseconds())*100/1e9, now)
	if ms > 0 {
		s.Throttled(user, c.ClientID, ms, now)
		c.Throttle(time.Duration(ms) * time.Millisecond)
	}
}

func requestQuotaExempt(c *server.Call) bool {
	switch c.Key {
	case 27: // WriteTxnMarkers: a cluster action
		return true
	case 0:
		if p, ok := c.Request.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			return true
		}
	}
	return false
}

// fetchQuotaCap is the most a client's fetch may return without being
// throttled for sure (Apache caps fetch.max.bytes with it); ok false
// when no fetch quota applies.
func (b *Broker) fetchQuotaCap(c *server.Call) (int32, bool) {
	s := b.quotas.sensors[quota.Fetch]
	if !s.Enabled() {
		return 0, false
	}
	v, ok := s.MaxValueInWindow(quotaUser(c), c.ClientID, time.Now().UnixMilli())
	if !ok {
		return 0, false
	}
	return int32(min(v, float64(1<<31-1))), true
}

// unrecordFetch takes back a throttled fetch's bytes: its answer goes
// out empty (ClientQuotaManager.unrecordQuotaSensor).
func (b *Broker) unrecordFetch(c *server.Call, bytes int) {
	b.quotas.sensors[quota.Fetch].RecordNoThrottle(quotaUser(c), c.ClientID, -float64(bytes), time.Now().UnixMilli())
}

// fetchQuota applies the consumer byte-rate quota to a fetch answer of
// resp's size: within quota (and not throttled by the request quota)
// the answer goes as it is; otherwise its bytes are taken back, the call
// is throttled and the answer goes out empty (Apache's KafkaApis).
func (b *Broker) fetchQuota(c *server.Call, resp *kmsg.FetchResponse) (throttled bool) {
	if !b.quotas.sensors[quota.Fetch].Enabled() {
		return c.Throttled() > 0 && b.quotas.sensors[quota.Request].Enabled()
	}
	size := fetchResponseSize(resp)
	d := b.recordBandwidth(quota.Fetch, c, size)
	if d == 0 && c.Throttled() == 0 {
		return false
	}
	b.unrecordFetch(c, size)
	c.Throttle(d)
	return true
}

// fetchResponseSize is about what resp encodes to: its record bytes and
// each topic's and partition's fixed fields (Apache counts the encoded
// size; the records dominate it).
func fetchResponseSize(resp *kmsg.FetchResponse) int {
	n := 16
	for i := range resp.Topics {
		t := &resp.Topics[i]
		n += 24 + len(t.Topic)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			n += 50 + len(p.RecordBatches) + 16*len(p.AbortedTransactions)
		}
	}
	return n
}

// mutationQuota is one topic request's controller mutation quota
// (KIP-599): strict for CreateTopics v6+, CreatePartitions v3+ and
// DeleteTopics v5+ (a topic over quota gets THROTTLING_QUOTA_EXCEEDED),
// permissive below (recorded, only throttled).
type mutationQuota struct {
	b        *Broker
	c        *server.Call
	strict   bool
	throttle int64 // ms, as of at
	at       time.Time
}

func (b *Broker) mutationQuota(c *server.Call, strictSince int16) *mutationQuota {
	if !b.quotas.sensors[quota.ControllerMutation].Enabled() {
		return nil
	}
	return &mutationQuota{b: b, c: c, strict: c.Version >= strictSince}
}

// record takes partitions mutations; false: refused (strict, over quota).
func (m *mutationQuota) record(partitions int) bool {
	if m == nil {
		return true
	}
	now := time.Now()
	ms, refused := m.b.quotas.sensors[quota.ControllerMutation].Mutation(quotaUser(m.c), m.c.ClientID, float64(partitions), m.strict, now.UnixMilli())
	if ms > 0 {
		m.throttle, m.at = ms, now
	}
	return !refused
}

// finish throttles the call for what is left of the last violation's
// throttle time (AbstractControllerMutationQuota.throttleTime).
func (m *mutationQuota) finish() {
	if m == nil || m.throttle == 0 {
		return
	}
	left := time.Duration(m.throttle)*time.Millisecond - time.Since(m.at)
	if left > 0 {
		s := m.b.quotas.sensors[quota.ControllerMutation]
		s.Throttled(quotaUser(m.c), m.c.ClientID, left.Milliseconds(), time.Now().UnixMilli())
		m.c.Throttle(left)
	}
}

var quotaKindNames = [...]string{"produce", "fetch", "request", "controller_mutation"}

// quotaSamples lists every sensor for /metrics.
func (b *Broker) quotaSamples() []metrics.QuotaSample {
	var out []metrics.QuotaSample
	now := time.Now().UnixMilli()
	for _, k := range quota.Kinds {
		s := b.quotas.sensors[k]
		if s == nil || !s.Enabled() {
			continue
		}
		for _, st := range s.Stats(now) {
			out = append(out, metrics.QuotaSample{
				Quota: quotaKindNames[k], User: st.Tags.User, ClientID: st.Tags.ClientID,
				Limit: st.Limit, Limited: st.Limited, Rate: st.Rate, Tokens: st.Tokens,
				ThrottleAvgSeconds: st.ThrottleAvgMs / 1000, Throttles: st.Throttles, ThrottledSeconds: float64(st.ThrottleMs) / 1000,
			})
		}
	}
	return out
}

// applyEntityViews applies the entity configs of a cluster view: quotas
// client-metrics subscriptions, features and group configs.
func (b *Broker) applyEntityViews(v *coord.View) {
	b.applyQuotaView(v)
	b.applyClientMetricsView(v)
	b.applyFeaturesView(v)
	b.applyGroupConfigsView(v)
}

// partitionsAdded is what growing topic to count partitions adds (the
// mutations CreatePartitions is charged for).
func (b *Broker) partitionsAdded(topic string, count int32) int {
	if t := b.topics.load().byName[topic]; t != nil && count > t.meta.Partitions {
		return int(count - t.meta.Partitions)
	}
	return 0
}
