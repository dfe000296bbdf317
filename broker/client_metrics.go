package broker

// KIP-714 client metrics: CLIENT_METRICS config resources (subscriptions:
// metrics, interval.ms, match) set with IncrementalAlterConfigs and
// stored as entity configs (client-metrics.json; etcd client-metrics/ in
// a cluster, applied live from the watch), the client instances that
// GetTelemetrySubscriptions and PushTelemetry track
// (state/clientmetrics), and the pushed OTLP metrics, exported on
// /metrics as kaas_client_* with the client's instance id, client id and
// principal.

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/coord"
	"kaas/metrics"
	"kaas/net/server"
	"kaas/state/clientmetrics"
	"kaas/state/topics"
	"kaas/storage/partlog"
)

// clientTelemetry is the broker's KIP-714 state.
type clientTelemetry struct {
	store  entityStore
	mgr    *clientmetrics.Manager
	stored map[string]map[string]string // subscription → config → value; under quotas.mu
	rev    int64
}

// maxDecompressedTelemetry bounds what a push may inflate to: its
// compressed size is bounded by telemetry.max.bytes, not this.
const maxDecompressedTelemetry = 16 << 20

func (b *Broker) openClientMetrics() error {
	store, err := b.openEntityStore(coord.ClientMetrics)
	if err != nil {
		return err
	}
	maxBytes := b.cfg.TelemetryMaxBytes
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	b.telemetry = clientTelemetry{store: store, mgr: clientmetrics.NewManager(maxBytes)}
	stored, rev, err := store.Load()
	if err != nil {
		return err
	}
	b.telemetry.rev = rev
	b.setSubscriptions(stored)
	b.metrics.RegisterClientTelemetry(telemetrySource{b.telemetry.mgr})
	return nil
}

// setSubscriptions publishes the stored subscriptions (escaped name →
// config → value); one that no longer validates is skipped and logged.
func (b *Broker) setSubscriptions(stored map[string]map[string]string) {
	subs := map[string]clientmetrics.Subscription{}
	byName := map[string]map[string]string{}
	for key, configs := range stored {
		name, err := url.QueryUnescape(key)
		if err != nil {
			b.log.Warn("ignoring a stored client-metrics subscription with a bad name", "name", key)
			continue
		}
		s, err := clientmetrics.Parse(name, configs)
		if err != nil {
			b.log.Warn("ignoring a stored client-metrics subscription that does not validate", "name", name, "err", err)
			continue
		}
		subs[name], byName[name] = s, configs
	}
	b.telemetry.stored = byName
	b.telemetry.mgr.SetSubscriptions(subs)
}

func (b *Broker) applyClientMetricsView(v *coord.View) {
	b.quotas.mu.Lock()
	defer b.quotas.mu.Unlock()
	if b.telemetry.mgr == nil || v.Rev < b.telemetry.rev {
		return
	}
	b.telemetry.rev = v.Rev
	b.setSubscriptions(v.Entities[coord.ClientMetrics])
}

// clientMetricsResources lists the CLIENT_METRICS resources
// (ListConfigResources).
func (b *Broker) clientMetricsResources() []string { return b.telemetry.mgr.Names() }

// clientMetricsEntries describes one subscription's configs: those set,
// with source CLIENT_METRICS_CONFIG (Apache's ConfigHelper); an unknown
// name has none.
func (b *Broker) clientMetricsEntries(name string, names []string) ([]configEntry, error) {
	if name == "" {
		return nil, &topicError{kerr.InvalidRequest.Code, "Client metrics subscription name must not be empty"}
	}
	b.quotas.mu.Lock()
	configs := maps.Clone(b.telemetry.stored[name])
	b.quotas.mu.Unlock()
	var out []configEntry
	for _, n := range filterNames(clientmetrics.ConfigNames, names) {
		v, ok := configs[n]
		if !ok {
			continue
		}
		typ := topics.TypeList
		if n == clientmetrics.ConfigInterval {
			typ = topics.TypeInt
		}
		out = append(out, configEntry{name: n, value: &v, source: kmsg.ConfigSourceClientMetricsConfig, typ: typ})
	}
	return out, nil
}

// alterClientMetrics changes one subscription (IncrementalAlterConfigs,
// or AlterConfigs with replace) and persists it; validation is Apache's
// ClientMetricsConfigs.validate on the resulting configs, and a
// subscription left with none is removed.
func (b *Broker) alterClientMetrics(name string, changes []configChange, replace, validateOnly bool) error {
	b.quotas.mu.Lock()
	defer b.quotas.mu.Unlock()
	current := b.telemetry.stored[name]
	next, err := applyChanges(current, changes, replace, func(key string) (bool, string) {
		return key == clientmetrics.ConfigMetrics || key == clientmetrics.ConfigMatch, ""
	}, func(key string) error {
		return &topicError{kerr.InvalidConfig.Code, "Config value append is not allowed for config key: " + key}
	})
	if err != nil {
		return err
	}
	if _, err := clientmetrics.Parse(name, next); err != nil {
		code := kerr.InvalidRequest.Code
		if e, ok := err.(*clientmetrics.Error); ok && e.Config {
			code = kerr.InvalidConfig.Code
		}
		return &topicError{code, err.Error()}
	}
	if validateOnly {
		return nil
	}
	set, remove := entityChanges(current, next)
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	if err := b.telemetry.store.Apply(url.QueryEscape(name), set, remove); err != nil {
		return fmt.Errorf("persisting client-metrics subscription %s: %w", name, err)
	}
	stored, rev, err := b.telemetry.store.Load()
	if err != nil {
		return fmt.Errorf("reloading client-metrics subscriptions: %w", err)
	}
	b.telemetry.rev = max(b.telemetry.rev, rev)
	b.setSubscriptions(stored)
	b.log.Info("altered client-metrics subscription", "name", name, "configs", next)
	return nil
}

// telemetryClient is what a call's client is, for subscription matching.
func telemetryClient(c *server.Call) clientmetrics.Client {
	host, port, _ := net.SplitHostPort(c.Remote)
	name, version := c.Session().ClientSoftware()
	return clientmetrics.Client{ClientID: c.ClientID, SoftwareName: name, SoftwareVersion: version, SourceAddress: host, SourcePort: port}
}

// decodeTelemetry inflates and decodes a push's payload.
func decodeTelemetry(payload []byte, codec int8) ([]clientmetrics.Series, int, error) {
	raw, err := partlog.Decompress(codec, payload, maxDecompressedTelemetry)
	if err != nil {
		return nil, 0, err
	}
	return clientmetrics.Decode(raw)
}

// expireTelemetry forgets the client instances that stopped pushing.
func (b *Broker) expireTelemetry(now time.Time) {
	if b.telemetry.mgr != nil {
		b.telemetry.mgr.Expire(now.UnixMilli())
	}
}

// telemetrySource exports what clients pushed.
type telemetrySource struct{ m *clientmetrics.Manager }

func (s telemetrySource) ClientInstances() int       { return s.m.Len() }
func (s telemetrySource) DroppedClientSeries() int64 { return s.m.Dropped() }

func (s telemetrySource) ClientSeries() []metrics.ClientSeries {
	var out []metrics.ClientSeries
	s.m.Each(func(in *clientmetrics.Instance) {
		for _, sr := range in.Series {
			cs := metrics.ClientSeries{InstanceID: in.ID.String(), ClientID: in.Client.ClientID, Principal: in.Principal,
				Name: sr.Name, Counter: sr.Kind == clientmetrics.Counter, Value: sr.Value}
			for _, l := range sr.Labels {
				cs.Labels = append(cs.Labels, [2]string{l.Name, l.Value})
			}
			out = append(out, cs)
		}
	})
	return out
}
