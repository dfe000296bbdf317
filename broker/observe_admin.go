package broker

import (
	"context"
	"strconv"
	"strings"

	"kaas/actors/system"
	"kaas/broker/admin"
)

// startObservability points the scrape-time metrics at this broker and,
// when an admin address is configured, starts the admin HTTP listener
// (/metrics, the actor inspector).
func (b *Broker) startObservability() error {
	b.watchForMetrics()
	if b.cfg.AdminAddr == "" {
		return nil
	}
	srv, err := admin.Listen(admin.Config{
		Addr:     b.cfg.AdminAddr,
		Gatherer: b.metrics.Registry,
		Requests: b.metrics.RequestRegistry,
		Actors:   b.sys,
		Summaries: map[string]admin.SummaryFunc{
			"partition": b.partitionSummary,
			// These kinds' state functions read what the actor published:
			// digest them inline, without a goroutine per actor per refresh.
			"txn": publishedSummary, "group": publishedSummary, "fence": publishedSummary, "txn-expiry": publishedSummary,
		},
		Source:        inspectorSource{b},
		Events:        b.metrics.Events,
		TxnMaxTimeout: b.cfg.TxnMaxTimeout,
		Connections:   b.connections,
		Ready:         b.Ready,
		Cluster:       b.clusterStatus,
		Panels:        []func() admin.Panel{b.clusterPanel, b.fetchSessionPanel, b.quotaPanel, b.quotaSensorPanel, b.clientMetricsPanel},
		Logger:        b.log,
	})
	if err != nil {
		return err
	}
	b.admin = srv
	// Debug: `kaas serve` names the admin address in its "listening on" line,
	// which must be the first line once the broker is ready.
	b.log.Debug("admin listener on "+srv.Addr(), "metrics", "http://"+srv.Addr()+"/metrics")
	return nil
}

// AdminAddr is the bound admin listener address, or "" when it is off.
func (b *Broker) AdminAddr() string {
	if b.admin == nil {
		return ""
	}
	return b.admin.Addr()
}

func (b *Broker) stopAdmin(ctx context.Context) error {
	if b.admin == nil {
		return nil
	}
	return b.admin.Close(ctx)
}

// publishedSummary digests an actor whose state function reads published
// state (never asks the actor).
func publishedSummary(info *system.Info) map[string]any { return admin.Digest(info.State(info.PID)) }

// partitionSummary digests a partition actor from its published view, so
// listing a thousand partitions asks none of them anything.
func (b *Broker) partitionSummary(info *system.Info) map[string]any {
	name := strings.TrimPrefix(info.Name, "partition/")
	cut := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[cut+1:])
	if cut < 0 || err != nil {
		return map[string]any{"status": "unexpected partition actor name"}
	}
	h := b.partition(name[:cut], int32(n))
	if h == nil || h.Name() != info.Name {
		return map[string]any{"status": "not in the topic registry"}
	}
	v := h.View()
	return map[string]any{
		"log_start": v.LogStart, "hw": v.HighWatermark, "lso": v.LastStable, "end": v.EndOffset,
		"size_bytes": v.Size, "segments": v.SegmentCount(), "producers": h.ProducerIDs(),
	}
}
