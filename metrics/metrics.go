// Package metrics defines every Prometheus metric kaas exports, in one
// place, on a registry per broker (tests run several brokers in one
// process). Names follow Prometheus conventions: kaas_ prefix, base units,
// _total for counters, _seconds and _bytes suffixes.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kaas/metrics/events"
)

// Metrics holds the broker's collectors. A nil *Metrics is not valid; use
// New (tests included) so every code path can record unconditionally.
type Metrics struct {
	Registry *prometheus.Registry
	// RequestRegistry holds only the request collectors (Requests,
	// RequestErrors, RequestDuration), also registered in Registry: the
	// inspector samples them every second without gathering every
	// partition's gauges.
	RequestRegistry *prometheus.Registry

	// Requests, by API name and version.
	Requests        *prometheus.CounterVec   // api, version
	RequestErrors   *prometheus.CounterVec   // api, error
	RequestDuration *prometheus.HistogramVec // api, version
	Connections     prometheus.Gauge
	network         // limits, accept errors, request budget, event-loop time

	// Data in and out, by topic.
	BytesIn           *prometheus.CounterVec // topic
	BytesOut          *prometheus.CounterVec // topic
	RecordsIn         *prometheus.CounterVec // topic
	RecordsOut        *prometheus.CounterVec // topic
	ProduceBatchBytes prometheus.Histogram
	FetchBytes        prometheus.Histogram
	FetchesWaiting    prometheus.Gauge
	// Incremental fetch sessions (KIP-227): Apache's
	// NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached
	// and IncrementalFetchSessionEvictionsPerSec.
	FetchSessions          prometheus.Gauge
	FetchSessionPartitions prometheus.Gauge
	FetchSessionEvictions  prometheus.Counter

	// Durability.
	Fsyncs             prometheus.Counter
	FsyncDuration      prometheus.Histogram
	GroupCommitAppends prometheus.Histogram
	StorageFailures    *prometheus.CounterVec // store
	QuarantinedFiles   *prometheus.CounterVec // store

	// Producers and transactions.
	EpochBumps         prometheus.Counter
	EpochRotations     prometheus.Counter
	FencesEmitted      prometheus.Counter
	FencesAppliedLocal prometheus.Counter
	FencesAppliedPeers prometheus.Counter
	FenceWatcherTicks  prometheus.Counter
	FencePollLag       prometheus.Gauge
	FenceFanout        prometheus.Histogram
	FenceFileFsync     prometheus.Histogram
	TxnCommits         prometheus.Counter
	TxnAborts          prometheus.Counter
	TxnReaperAborts    prometheus.Counter
	// TxnEarlyEnds counts TV2 EndTxns answered before their markers
	// (R-TV2-7); TxnEndFenceFailures those whose end fence was not
	// acknowledged everywhere, answered after the markers instead.
	TxnEarlyEnds        prometheus.Counter
	TxnEndFenceFailures prometheus.Counter

	// Consumer groups.
	Rebalances              prometheus.Counter
	Groups                  *prometheus.GaugeVec // type, state
	OffsetCommits           prometheus.Counter
	OffsetsFsyncDuration    prometheus.Histogram
	OffsetsGroupCommitSizes prometheus.Histogram
	TxnLogFsyncDuration     prometheus.Histogram
	TxnLogGroupCommitSizes  prometheus.Histogram
	ShareStateFsyncDuration prometheus.Histogram

	// Security.
	Authentications      *prometheus.CounterVec // listener, mechanism, result (ok, failed)
	AuthorizationDenials *prometheus.CounterVec // api, resource_type
	TLSHandshakes        *prometheus.CounterVec // listener, result (ok, failed)
	Reauthentications    *prometheus.CounterVec // listener, mechanism, result (ok, failed): KIP-368
	ExpiredSessions      *prometheus.CounterVec // listener: connections closed when their SASL session ended

	// State counts read at scrape time from whoever owns the states: the
	// transaction coordinator calls TxnStates.SetSource.
	TxnStates *StateCounts // kaas_transactions{state}

	// Events is the journal of rare events (epoch bumps, fences, zombie
	// batches rejected) the inspector shows as timelines.
	Events *events.Journal

	partitions *partitionCollector
	actors     *actorCollector
	shares     *shareCollector
	cleaner    *cleanerCollector
	collectors []prometheus.Collector // everything registered, for Names
}

// New creates the collectors on a fresh registry, with the Go runtime and
// process collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{Registry: r, Events: events.New()}
	f := m.register
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	latency := []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	sizes := prometheus.ExponentialBuckets(64, 4, 10) // 64 B … 16 MiB

	m.Requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_requests_total", Help: "Requests answered, by API and version."}, []string{"api", "version"})
	m.RequestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_request_errors_total", Help: "Error codes sent in answers (one per partition or resource that failed), by API and Kafka error name."}, []string{"api", "error"})
	m.RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kaas_request_duration_seconds", Help: "Time from a request's arrival to its answer being queued, by API and version.", Buckets: latency}, []string{"api", "version"})
	m.Connections = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_connections", Help: "Open client connections."})
	for _, c := range []prometheus.Collector{m.Requests, m.RequestErrors, m.RequestDuration, m.Connections} {
		f(c)
	}
	m.newNetwork()
	m.RequestRegistry = prometheus.NewRegistry()
	m.RequestRegistry.MustRegister(m.Requests, m.RequestErrors, m.RequestDuration)

	m.BytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_topic_bytes_in_total", Help: "Record batch bytes appended, by topic."}, []string{"topic"})
	m.BytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_topic_bytes_out_total", Help: "Record batch bytes returned by fetches, by topic."}, []string{"topic"})
	m.RecordsIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_topic_records_in_total", Help: "Records appended, by topic."}, []string{"topic"})
	m.RecordsOut = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_topic_records_out_total", Help: "Records returned by fetches, by topic (counted per batch header)."}, []string{"topic"})
	m.ProduceBatchBytes = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_produce_batch_bytes", Help: "Size of produced record batches.", Buckets: sizes})
	m.FetchBytes = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_fetch_response_bytes", Help: "Record bytes per fetch answer.", Buckets: sizes})
	m.FetchesWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_fetches_waiting", Help: "Fetches waiting for MinBytes (long polls), woken by appends or their MaxWait."})
	m.FetchSessions = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_fetch_sessions", Help: "Incremental fetch sessions (KIP-227) held, at most max.incremental.fetch.session.cache.slots."})
	m.FetchSessionPartitions = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_fetch_session_partitions", Help: "Partitions cached in all incremental fetch sessions."})
	m.FetchSessionEvictions = prometheus.NewCounter(prometheus.CounterOpts{Name: "kaas_fetch_session_evictions_total", Help: "Incremental fetch sessions evicted to make room for a new one."})
	for _, c := range []prometheus.Collector{m.BytesIn, m.BytesOut, m.RecordsIn, m.RecordsOut, m.ProduceBatchBytes, m.FetchBytes, m.FetchesWaiting, m.FetchSessions, m.FetchSessionPartitions, m.FetchSessionEvictions} {
		f(c)
	}

	m.Fsyncs = prometheus.NewCounter(prometheus.CounterOpts{Name: "kaas_fsyncs_total", Help: "Log fsyncs (one covers every append waiting at that moment)."})
	m.FsyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_fsync_duration_seconds", Help: "Time one log fsync took.", Buckets: latency})
	m.GroupCommitAppends = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_group_commit_appends", Help: "Appends one fsync covered (group-commit batch size).", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	m.StorageFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_storage_failures_total", Help: "Disk writes or fsyncs that failed, by store (partition, offsets log, ...): each takes that partition or log offline until a restart."}, []string{"store"})
	m.QuarantinedFiles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_quarantined_files_total", Help: "Corrupt files moved to <data>/quarantine at start-up (--skip-corrupt), by store."}, []string{"store"})
	for _, c := range []prometheus.Collector{m.Fsyncs, m.FsyncDuration, m.GroupCommitAppends, m.StorageFailures, m.QuarantinedFiles} {
		f(c)
	}

	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		f(c)
		return c
	}
	m.EpochBumps = counter("kaas_producer_epoch_bumps_total", "InitProducerId epoch bumps on an existing producer id (KIP-360), including fence and reaper bumps.")
	m.EpochRotations = counter("kaas_producer_id_rotations_total", "Exhausted epochs rotated to a fresh producer id.")
	m.FencesEmitted = counter("kaas_fences_emitted_total", "Producer fences (pid, epoch) issued by this broker's coordinator.")
	m.FencesAppliedLocal = counter("kaas_fences_applied_local_total", "Fences fanned out to this broker's partitions from its own coordinator.")
	m.FencesAppliedPeers = counter("kaas_fences_applied_peers_total", "Fences read from peers' fence files and applied here.")
	m.FenceWatcherTicks = counter("kaas_fence_watcher_ticks_total", "Polls of the shared fence directory.")
	m.FencePollLag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kaas_fence_poll_lag_seconds", Help: "Age of the newest peer fence file when it was last applied (how far behind the fence watcher runs)."})
	f(m.FencePollLag)
	m.FenceFanout = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_fence_fanout_seconds", Help: "Time for one fence to be in force on every local partition (the broker-wide floor every partition actor consults is raised).", Buckets: latency})
	f(m.FenceFanout)
	m.FenceFileFsync = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_fence_file_fsync_seconds", Help: "Time one fsync of this broker's fence file took (one covers every bump waiting; a bump is answered after it and its transaction state fsync, which run concurrently).", Buckets: latency})
	f(m.FenceFileFsync)
	m.TxnCommits = counter("kaas_transactions_committed_total", "Transactions completed with COMMIT.")
	m.TxnAborts = counter("kaas_transactions_aborted_total", "Transactions completed with ABORT (client, rejoin or reaper).")
	m.TxnReaperAborts = counter("kaas_transactions_reaper_aborts_total", "Transactions aborted by the timeout reaper.")
	m.TxnEarlyEnds = counter("kaas_transactions_early_ends_total", "TV2 EndTxns answered once Prepare* was durable and the end fence acknowledged, before the markers.")
	m.TxnEndFenceFailures = counter("kaas_transactions_end_fence_failures_total", "TV2 EndTxns whose end fence was not acknowledged by every partition's leader (answered after the markers).")
	m.Rebalances = counter("kaas_group_rebalances_total", "Consumer group rebalances started.")
	m.Groups = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kaas_groups", Help: "Consumer groups, by type and state, as Apache's classic-group-count and consumer-group-count: type=classic (Empty, PreparingRebalance, CompletingRebalance, Stable) and type=consumer, KIP-848 (Empty, Assigning, Reconciling, Stable)."}, []string{"type", "state"})
	m.OffsetCommits = counter("kaas_offset_commits_total", "Partition offsets made durable by OffsetCommit.")
	m.OffsetsFsyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_offsets_fsync_duration_seconds", Help: "Time one fsync of a consumer offsets slot log took (slots fsync concurrently).", Buckets: latency})
	m.OffsetsGroupCommitSizes = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_offsets_group_commit_appends", Help: "Offsets log appends (commits, group metadata, markers) one fsync of a slot log covered, across groups.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	m.TxnLogFsyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_txn_log_fsync_duration_seconds", Help: "Time one fsync of a transaction state slot log took (slots fsync concurrently).", Buckets: latency})
	m.TxnLogGroupCommitSizes = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_txn_log_group_commit_appends", Help: "Transaction state transitions one fsync of a slot log covered, across transactional ids.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	m.ShareStateFsyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kaas_share_state_fsync_duration_seconds", Help: "Time one fsync of a share state log took (share-partitions' acknowledgements are answered after it).", Buckets: latency})
	for _, c := range []prometheus.Collector{m.Groups, m.OffsetsFsyncDuration, m.OffsetsGroupCommitSizes, m.TxnLogFsyncDuration, m.TxnLogGroupCommitSizes, m.ShareStateFsyncDuration} {
		f(c)
	}

	m.Authentications = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_authentications_total", Help: "SASL authentications, by listener, mechanism and result (ok, failed)."}, []string{"listener", "mechanism", "result"})
	m.AuthorizationDenials = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_authorization_denials_total", Help: "Operations the authorizer denied, by API and resource type (topic, group, cluster, transactional_id)."}, []string{"api", "resource_type"})
	m.TLSHandshakes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_tls_handshakes_total", Help: "TLS handshakes on TLS listeners, by listener and result (ok, failed: untrusted or expired client certificate, not TLS, timeout)."}, []string{"listener", "result"})
	m.Reauthentications = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_reauthentications_total", Help: "SASL re-authentications on open connections (KIP-368), by listener, mechanism and result (ok, failed)."}, []string{"listener", "mechanism", "result"})
	m.ExpiredSessions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kaas_expired_sessions_closed_total", Help: "Connections closed because their SASL session ended (connections.max.reauth.ms) before they re-authenticated, by listener."}, []string{"listener"})
	for _, c := range []prometheus.Collector{m.Authentications, m.AuthorizationDenials, m.TLSHandshakes, m.Reauthentications, m.ExpiredSessions} {
		f(c)
	}

	m.TxnStates = NewStateCounts("kaas_transactions", "Transactional ids known to the coordinator, by transaction state.", "state")
	m.partitions = newPartitionCollector()
	m.actors = newActorCollector()
	m.cleaner = newCleanerCollector()
	for _, c := range []prometheus.Collector{m.TxnStates, m.partitions, m.actors, m.cleaner} {
		f(c)
	}
	return m
}

// register adds c to the registry and remembers it for Names.
func (m *Metrics) register(c prometheus.Collector) {
	m.Registry.MustRegister(c)
	m.collectors = append(m.collectors, c)
}
