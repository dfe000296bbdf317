package broker

// The inspector's overview panels for client quotas and KIP-714 client
// metrics: every quota entity and its values, every quota sensor (who is
// measured against what, and how often throttled), and the client
// instances pushing metrics.

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"kaas/broker/admin"
	"kaas/state/clientmetrics"
	"kaas/state/quota"
)

// inspectorRows bounds each panel.
const inspectorRows = 200

func (b *Broker) quotaPanel() admin.Panel {
	p := admin.Panel{Title: "Client quotas", Columns: []string{"entity", "quotas"}}
	for _, e := range b.quotas.cfg.Load().Entries() {
		if len(p.Rows) == inspectorRows {
			break
		}
		var vals []string
		for _, k := range slices.Sorted(maps.Keys(e.Values)) {
			vals = append(vals, k+"="+quota.FormatValue(e.Values[k]))
		}
		p.Rows = append(p.Rows, []string{quotaEntityLabel(e.Entity), strings.Join(vals, ", ")})
	}
	return p
}

// quotaEntityLabel is kadm's form: user=alice, client-id=<default>.
func quotaEntityLabel(e quota.Entity) string {
	var parts []string
	for _, c := range e.Components() {
		n := "<default>"
		if c.Name != nil {
			n = *c.Name
		}
		parts = append(parts, c.Type+"="+n)
	}
	return strings.Join(parts, ", ")
}

func (b *Broker) quotaSensorPanel() admin.Panel {
	p := admin.Panel{Title: "Quota sensors", Columns: []string{"quota", "user", "client id", "limit", "rate", "throttles", "throttled", "avg throttle"}}
	for _, s := range b.quotaSamples() {
		if len(p.Rows) == inspectorRows {
			break
		}
		limit := "none"
		if s.Limited {
			limit = quota.FormatValue(s.Limit)
		}
		p.Rows = append(p.Rows, []string{s.Quota, s.User, s.ClientID, limit, strconv.FormatFloat(s.Rate, 'f', 1, 64),
			strconv.FormatInt(s.Throttles, 10), (time.Duration(s.ThrottledSeconds * float64(time.Second))).Round(time.Millisecond).String(),
			(time.Duration(s.ThrottleAvgSeconds * float64(time.Second))).Round(time.Millisecond).String()})
	}
	return p
}

func (b *Broker) clientMetricsPanel() admin.Panel {
	p := admin.Panel{Title: "Client metrics (KIP-714)", Columns: []string{"instance", "client id", "principal", "software", "subscribed", "interval", "series"}}
	b.telemetry.mgr.Each(func(in *clientmetrics.Instance) {
		if len(p.Rows) == inspectorRows {
			return
		}
		sw := strings.TrimSpace(in.Client.SoftwareName + " " + in.Client.SoftwareVersion)
		p.Rows = append(p.Rows, []string{in.ID.String(), in.Client.ClientID, in.Principal, sw, strings.Join(in.Metrics, ", "),
			(time.Duration(in.IntervalMs) * time.Millisecond).String(), strconv.Itoa(len(in.Series))})
	})
	return p
}
