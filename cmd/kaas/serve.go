package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"kaas/broker"
	"kaas/state/acl"
	"kaas/state/consumergroup"
	"kaas/state/topics"
	"kaas/storage/datalock"
)

const serveUsage = `Usage: kaas serve [flags]

Runs a broker until SIGINT or SIGTERM, then stops accepting connections,
answers the requests in flight, fsyncs every partition and exits 0 — or 1
if anything written could not be made durable (a disk error). A second
signal exits at once. The first log line once the port accepts
connections is "listening on ADDR". A corrupt data file stops the start
with an error naming it (see --skip-corrupt). A single broker holds
<data>/.lock while it runs: a second process on the same directory
refuses to start, naming the holder's pid.

Flags:
`

// serveFlags defines every `kaas serve` flag on a new FlagSet, writing
// into cfg; apply copies the flags that need converting once parsed.
func serveFlags(cfg *broker.Config) (fs *flag.FlagSet, apply func() error) {
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "`host:port` of one PLAINTEXT listener, the shorthand for --listeners PLAINTEXT://host:port (port 0 picks a free one)")
	fs.StringVar(&cfg.AdvertisedAddr, "advertised-listener", "", "`host:port` given to clients in metadata (default: the bound listen address)")
	fs.StringVar(&cfg.DataDir, "data", cfg.DataDir, "data `directory` (partition logs and __cluster metadata)")
	fs.BoolVar(&cfg.SkipCorrupt, "skip-corrupt", cfg.SkipCorrupt, "start even when a file is corrupt: move it to <data>/quarantine and go on without what it held (default: refuse to start, naming the file and byte offset)")
	brokerID := fs.Int("broker-id", int(cfg.BrokerID), "this broker's node `id` (producer ids are allocated per broker id)")
	fs.StringVar(&cfg.AdminAddr, "admin", cfg.AdminAddr, "`host:port` of the admin HTTP listener (/metrics, inspector); empty disables it")
	fs.IntVar(&cfg.EventLoops, "event-loops", cfg.EventLoops, "number of network event loops (num.network.threads)")
	fs.IntVar(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest request frame accepted; a larger one closes the connection (socket.request.max.bytes)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "open connections at which accepting waits until one closes (max.connections)")
	fs.IntVar(&cfg.MaxConnectionsPerIP, "max-connections-per-ip", cfg.MaxConnectionsPerIP, "open connections from one address beyond which new ones are closed at once (max.connections.per.ip)")
	fs.Int64Var(&cfg.QueuedMaxRequestBytes, "queued-max-request-bytes", cfg.QueuedMaxRequestBytes, "request bytes held in memory across connections before connections stop being read; -1 unlimited (queued.max.request.bytes)")
	fs.DurationVar(&cfg.ConnectionsMaxIdle, "connections-max-idle", cfg.ConnectionsMaxIdle, "close a connection with nothing in flight that has neither sent nor received a byte for this long; -1s never (connections.max.idle.ms)")
	fs.BoolVar(&cfg.AllowClientTxnMarkers, "allow-client-txn-markers", cfg.AllowClientTxnMarkers, "without an authorizer, let any connection send WriteTxnMarkers (by default only brokers may)")
	fetchMax := fs.Int("fetch-max-bytes", int(cfg.FetchMaxBytes), "most record bytes one Fetch answer carries, whatever the request asks; at least 1024 (fetch.max.bytes)")
	fs.IntVar(&cfg.QuotaWindowNum, "quota-window-num", cfg.QuotaWindowNum, "samples a client quota's rate is measured over (quota.window.num)")
	quotaWindow := fs.Int("quota-window-size-seconds", int(cfg.QuotaWindowSize/time.Second), "seconds each client quota sample spans (quota.window.size.seconds)")
	fs.IntVar(&cfg.TelemetryMaxBytes, "telemetry-max-bytes", cfg.TelemetryMaxBytes, "largest KIP-714 client metrics push accepted (telemetry.max.bytes)")
	fetchSlots := fs.Int("max-incremental-fetch-session-cache-slots", cfg.FetchSessionSlots, "incremental fetch sessions (KIP-227) the broker keeps; 0 keeps none (max.incremental.fetch.session.cache.slots)")
	fs.DurationVar(&cfg.FetchSessionEviction, "min-incremental-fetch-session-eviction", cfg.FetchSessionEviction, "how long a fetch session goes unused before any new session may take its slot (min.incremental.fetch.session.eviction.ms)")
	fs.BoolVar(&cfg.AutoCreateTopics, "auto-create-topics", cfg.AutoCreateTopics, "create unknown topics on Metadata and Produce (auto.create.topics.enable)")
	defaultPartitions := fs.Int("default-partitions", int(cfg.DefaultPartitions), "partitions of an auto-created topic (num.partitions)")
	fs.Int64Var(&cfg.SegmentBytes, "segment-bytes", cfg.SegmentBytes, "default segment.bytes: roll a segment at this size, at least 1 MiB (log.segment.bytes)")
	fs.BoolVar(&cfg.InternalTopicConfigs, "internal-topic-configs", false, "for tests only: accept the topic config internal.segment.bytes (segments below the 1 MiB floor), as Apache's tests use it")
	fs.Int64Var(&cfg.SegmentMs, "segment-ms", cfg.SegmentMs, "default segment.ms: roll a segment this much newer than its first record (log.roll.ms)")
	fs.Int64Var(&cfg.RetentionMs, "retention-ms", cfg.RetentionMs, "default retention.ms, -1 keeps forever (log.retention.ms)")
	fs.Int64Var(&cfg.RetentionBytes, "retention-bytes", cfg.RetentionBytes, "default retention.bytes per partition, -1 unlimited (log.retention.bytes)")
	maxMessage := fs.Int("max-message-bytes", int(cfg.MaxMessageBytes), "default max.message.bytes: largest record batch accepted (message.max.bytes)")
	flushMs := fs.Int("flush-interval-ms", 0, "0 fsyncs before every acknowledgement (group commit); N>0 acknowledges before fsync and fsyncs every N ms (log.flush.interval.ms): partition logs and the coordinators' transaction, offsets and share state logs alike, the order of writes kept, a power loss may lose what was answered")
	fs.DurationVar(&cfg.RetentionCheckInterval, "retention-check-interval", cfg.RetentionCheckInterval, "how often retention runs (log.retention.check.interval.ms)")
	fs.DurationVar(&cfg.TxnAbortInterval, "txn-abort-interval", cfg.TxnAbortInterval, "how often the transaction timeout reaper runs (transaction.abort.timed.out.transaction.cleanup.interval.ms)")
	fs.DurationVar(&cfg.TxnMaxTimeout, "txn-max-timeout", cfg.TxnMaxTimeout, "largest transaction timeout a producer may ask for (transaction.max.timeout.ms)")
	fs.DurationVar(&cfg.TransactionalIDExpiration, "transactional-id-expiration", cfg.TransactionalIDExpiration, "idle transactional ids are forgotten after this long (transactional.id.expiration.ms)")
	fs.DurationVar(&cfg.FencePollInterval, "fence-poll-interval", cfg.FencePollInterval, "how often peers' producer fence files on the shared volume are polled")
	fs.DurationVar(&cfg.TxnMarkerWait, "txn-marker-wait", cfg.TxnMarkerWait, "how long a transactional request that needs the previous transaction's markers waits for them in the broker before CONCURRENT_TRANSACTIONS (a TV2 Produce's implicit add waits until the Produce's timeout instead)")
	txnVersion := fs.Int("transaction-version", int(cfg.TransactionVersion), "transaction.version finalized until UpdateFeatures changes it: 2 bumps the producer epoch at every commit (KIP-890 part 2), 0 or 1 keeps clients on the classic protocol")
	fs.BoolVar(&cfg.TxnPartitionVerification, "txn-partition-verification", cfg.TxnPartitionVerification, "check a producer's first transactional batch on each partition against its coordinator (transaction.partition.verification.enable)")
	fs.DurationVar(&cfg.GroupInitialRebalanceDelay, "group-initial-rebalance-delay", cfg.GroupInitialRebalanceDelay, "how long a new consumer group waits for more members before its first rebalance (group.initial.rebalance.delay.ms)")
	fs.DurationVar(&cfg.ConsumerHeartbeatInterval, "group-consumer-heartbeat-interval", cfg.ConsumerHeartbeatInterval, "heartbeat interval given to KIP-848 consumer group members (group.consumer.heartbeat.interval.ms)")
	fs.DurationVar(&cfg.ConsumerSessionTimeout, "group-consumer-session-timeout", cfg.ConsumerSessionTimeout, "a KIP-848 consumer group member that stops heartbeating is fenced after this long (group.consumer.session.timeout.ms)")
	assignors := fs.String("group-consumer-assignors", strings.Join(cfg.ConsumerAssignors, ","), "server-side assignors KIP-848 members may ask for, the first the default: uniform, range, or Apache's class names for them (group.consumer.assignors)")
	fs.IntVar(&cfg.ConsumerMaxSize, "group-consumer-max-size", cfg.ConsumerMaxSize, "most members of a KIP-848 consumer group, 0 unlimited (group.consumer.max.size)")
	fs.StringVar(&cfg.ConsumerMigrationPolicy, "group-consumer-migration-policy", cfg.ConsumerMigrationPolicy, "which non-empty groups may convert between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled (group.consumer.migration.policy)")
	fs.DurationVar(&cfg.ShareHeartbeatInterval, "group-share-heartbeat-interval", cfg.ShareHeartbeatInterval, "heartbeat interval given to share group members (group.share.heartbeat.interval.ms)")
	fs.DurationVar(&cfg.ShareSessionTimeout, "group-share-session-timeout", cfg.ShareSessionTimeout, "a share group member that stops heartbeating is fenced and its records released after this long (group.share.session.timeout.ms)")
	fs.DurationVar(&cfg.ShareRecordLockDuration, "group-share-record-lock-duration", cfg.ShareRecordLockDuration, "how long a share group member holds a record before it is delivered again (group.share.record.lock.duration.ms)")
	fs.IntVar(&cfg.ShareDeliveryCountLimit, "group-share-delivery-count-limit", cfg.ShareDeliveryCountLimit, "a record delivered this many times to a share group is archived (group.share.delivery.count.limit)")
	fs.IntVar(&cfg.SharePartitionMaxRecordLocks, "group-share-partition-max-record-locks", cfg.SharePartitionMaxRecordLocks, "the most records in flight in one share-partition (group.share.partition.max.record.locks)")
	fs.IntVar(&cfg.ShareMaxSize, "group-share-max-size", cfg.ShareMaxSize, "the most members a share group may have (group.share.max.size)")
	fs.IntVar(&cfg.ShareMaxSessions, "group-share-max-share-sessions", cfg.ShareMaxSessions, "the most share sessions this broker keeps (group.share.max.share.sessions)")
	fs.StringVar(&cfg.ShareAutoOffsetReset, "share-auto-offset-reset", cfg.ShareAutoOffsetReset, "where a share group starts reading a partition, latest or earliest: Apache's group config share.auto.offset.reset, for every share group")
	fs.StringVar(&cfg.ShareIsolationLevel, "share-isolation-level", cfg.ShareIsolationLevel, "read_uncommitted or read_committed: Apache's group config share.isolation.level, for every share group")
	offsetsRetention := fs.Int("offsets-retention-minutes", int(cfg.OffsetsRetention/time.Minute), "how long committed offsets outlive an empty consumer group (offsets.retention.minutes)")
	listeners := fs.String("listeners", "", "`listeners` as Apache writes them, e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9095 (names PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or any name mapped by --listener-security-protocol-map); replaces --listen")
	advertisedListeners := fs.String("advertised-listeners", "", "`listeners` with the host:port their clients are told in metadata, e.g. SASL_SSL://kafka.example.com:9095 (advertised.listeners; default: the bound address)")
	protocolMap := fs.String("listener-security-protocol-map", "", "security `protocols` of custom listener names, e.g. INTERNAL:SASL_SSL,EXTERNAL:SSL (listener.security.protocol.map)")
	fs.StringVar(&cfg.InterBrokerTLSCAFile, "inter-broker-tls-ca", "", "PEM `file` of the CA that signed the peer brokers' certificates, when the inter-broker listener is TLS (default: --tls-client-ca, else the system roots)")
	fs.StringVar(&cfg.InterBrokerListener, "inter-broker-listener-name", "", "listener peer brokers connect to; they authenticate on it as a principal with CLUSTER_ACTION (inter.broker.listener.name)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", "", "PEM certificate `file` of TLS listeners (re-read when it changes)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", "", "PEM private key `file` of --tls-cert")
	fs.StringVar(&cfg.TLSClientCAFile, "tls-client-ca", "", "PEM `file` of the CAs client certificates must chain to: SSL listeners then require one (mutual TLS, principal User:<subject DN>); SASL_SSL listeners verify one if given")
	mechanisms := fs.String("sasl-mechanisms", strings.Join(cfg.SASLMechanisms, ","), "SASL `mechanisms` SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (sasl.enabled.mechanisms)")
	fs.BoolVar(&cfg.SASLPlainAllowInsecure, "sasl-plain-allow-insecure", false, "offer PLAIN on SASL_PLAINTEXT listeners too (the password then crosses the network in the clear)")
	fs.DurationVar(&cfg.FailedAuthDelay, "failed-auth-delay", cfg.FailedAuthDelay, "wait this long before answering a failed authentication and closing the connection (connection.failed.authentication.delay.ms)")
	fs.DurationVar(&cfg.ConnectionsMaxReauth, "connections-max-reauth", cfg.ConnectionsMaxReauth, "end a SASL session this long after it authenticated unless the client re-authenticates on its connection, KIP-368 (connections.max.reauth.ms; 0: never)")
	fs.IntVar(&cfg.SASLMaxReceiveBytes, "sasl-max-receive-bytes", cfg.SASLMaxReceiveBytes, "largest frame accepted before SASL authentication completes (sasl.server.max.receive.size)")
	fs.BoolVar(&cfg.Authorizer, "authorizer", false, "check every request against ACLs, as Apache's StandardAuthorizer (authorizer.class.name)")
	superUsers := fs.String("super-users", "", "`principals` allowed everything, separated by semicolons, e.g. User:admin;User:CN=broker-1 (super.users)")
	fs.BoolVar(&cfg.AllowEveryoneIfNoACL, "allow-everyone-if-no-acl", false, "with --authorizer: allow an operation on a resource no ACL names (allow.everyone.if.no.acl.found)")
	clusterEtcd := fs.String("cluster-etcd", "", "comma-separated etcd client `URLs`: run as one broker of a cluster sharing --data (see docs/cluster.md); empty runs a single broker")
	fs.StringVar(&cfg.ClusterName, "cluster-name", cfg.ClusterName, "the cluster's `name` (its key prefix in etcd; clusters may share an etcd)")
	fs.DurationVar(&cfg.SessionTTL, "session-ttl", cfg.SessionTTL, "cluster mode: the broker's etcd lease TTL (whole seconds); a broker stops acknowledging before it could expire, and peers take over its partitions after it does")
	fs.StringVar(&cfg.Rack, "rack", "", "cluster mode: this broker's rack (broker.rack), shown in Metadata")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	apply = func() error {
		var err error
		protocols, err := broker.ParseProtocolMap(*protocolMap)
		if err != nil {
			return usageError{error: fmt.Errorf("--listener-security-protocol-map: %w", err)}
		}
		if *listeners != "" {
			if cfg.Listeners, err = broker.ParseListeners(*listeners, protocols); err != nil {
				return usageError{error: fmt.Errorf("--listeners: %w", err)}
			}
		}
		if cfg.AdvertisedListeners, err = broker.ParseAdvertisedListeners(*advertisedListeners); err != nil {
			return usageError{error: fmt.Errorf("--advertised-listeners: %w", err)}
		}
		if cfg.SuperUsers, err = acl.ParseSuperUsers(*superUsers); err != nil {
			return usageError{error: fmt.Errorf("--super-users: %w", err)}
		}
		cfg.SASLMechanisms = nil
		for _, m := range strings.Split(*mechanisms, ",") {
			if m = strings.TrimSpace(m); m != "" {
				cfg.SASLMechanisms = append(cfg.SASLMechanisms, m)
			}
		}
		cfg.BrokerID = int32(*brokerID)
		if *txnVersion < 0 || *txnVersion > 2 {
			return usageError{error: fmt.Errorf("--transaction-version %d: must be 0, 1 or 2", *txnVersion)}
		}
		cfg.TransactionVersion = int16(*txnVersion)
		if *clusterEtcd != "" {
			for _, e := range strings.Split(*clusterEtcd, ",") {
				if e = strings.TrimSpace(e); e != "" {
					cfg.ClusterEtcd = append(cfg.ClusterEtcd, e)
				}
			}
		}
		cfg.DefaultPartitions = int32(*defaultPartitions)
		cfg.MaxMessageBytes = int32(*maxMessage)
		if cfg.SegmentBytes < topics.MinSegmentBytes || cfg.SegmentBytes > math.MaxInt32 {
			return usageError{error: fmt.Errorf("--segment-bytes %d: must be between %d and %d (log.segment.bytes)", cfg.SegmentBytes, topics.MinSegmentBytes, math.MaxInt32)}
		}
		if *fetchMax < 1024 || *fetchMax > math.MaxInt32 {
			return usageError{error: fmt.Errorf("--fetch-max-bytes %d: must be between 1024 and %d", *fetchMax, math.MaxInt32)}
		}
		cfg.FetchMaxBytes = int32(*fetchMax)
		if cfg.QuotaWindowNum < 1 || *quotaWindow < 1 || cfg.TelemetryMaxBytes < 1 {
			return usageError{error: fmt.Errorf("--quota-window-num, --quota-window-size-seconds and --telemetry-max-bytes must be at least 1")}
		}
		cfg.QuotaWindowSize = time.Duration(*quotaWindow) * time.Second
		if *fetchSlots < 0 {
			return usageError{error: fmt.Errorf("--max-incremental-fetch-session-cache-slots %d: must be at least 0", *fetchSlots)}
		}
		cfg.FetchSessionSlots = *fetchSlots
		if cfg.FetchSessionSlots == 0 {
			cfg.FetchSessionSlots = -1 // none (Config's 0 is the default)
		}
		cfg.FlushInterval = time.Duration(*flushMs) * time.Millisecond
		cfg.OffsetsRetention = time.Duration(*offsetsRetention) * time.Minute
		names, err := consumergroup.ParseAssignors(*assignors)
		if err != nil {
			return usageError{error: fmt.Errorf("--group-consumer-assignors: %w", err)}
		}
		cfg.ConsumerAssignors = names
		if _, err := consumergroup.ParseMigrationPolicy(cfg.ConsumerMigrationPolicy); err != nil {
			return usageError{error: fmt.Errorf("--group-consumer-migration-policy: %w", err)}
		}
		if r := cfg.ShareAutoOffsetReset; r != "latest" && r != "earliest" {
			return usageError{error: fmt.Errorf("--share-auto-offset-reset: %q is neither latest nor earliest", r)}
		}
		if l := cfg.ShareIsolationLevel; l != "read_uncommitted" && l != "read_committed" {
			return usageError{error: fmt.Errorf("--share-isolation-level: %q is neither read_uncommitted nor read_committed", l)}
		}
		var level slog.Level
		if err := level.UnmarshalText([]byte(strings.ToUpper(*logLevel))); err != nil {
			return usageError{error: fmt.Errorf("--log-level: %w", err)}
		}
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
		return nil
	}
	return fs, apply
}

// usageError is a command-line mistake: main exits 2 for it, as the flag
// package does. shown means the flag package already printed it.
type usageError struct {
	error
	shown bool
}

func runServe(args []string) error {
	cfg := broker.DefaultConfig()
	cfg.Version = version
	fs, apply := serveFlags(&cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err, true}
	}
	if fs.NArg() > 0 {
		return usageError{error: fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	if err := apply(); err != nil {
		return err
	}
	logger := cfg.Logger
	if len(cfg.ClusterEtcd) == 0 {
		// Held until the process exits. A cluster broker takes none:
		// etcd refuses a second broker with its id (see datalock).
		lock, err := datalock.Acquire(cfg.DataDir)
		if err != nil {
			return err
		}
		defer lock.Release()
	}

	// Listen for signals before starting: the first one (even during
	// start-up) means a clean shutdown as soon as the broker is up; a
	// second one exits at once, also when start-up itself is stuck.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	shutdown := make(chan os.Signal, 1)
	go func() {
		shutdown <- <-sigs
		sig := <-sigs
		logger.Error("second signal: exiting without finishing the shutdown", "signal", sig.String())
		os.Exit(1)
	}()

	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	logger.Info("listening on "+b.Addr(), "listeners", b.Listeners(), "data", cfg.DataDir, "broker_id", cfg.BrokerID, "advertised", b.Advertised(), "admin", b.AdminAddr())

	var sig os.Signal
	select {
	case sig = <-shutdown:
	case err := <-b.Failed():
		// Unreachable: exit non-zero so a supervisor restarts the broker
		// (partitions fsync and close on the way out).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = b.Close(ctx)
		return fmt.Errorf("broker unreachable: %w", err)
	}
	logger.Info("shutting down: no new connections; answering requests in flight", "signal", sig.String())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped: every partition fsynced and closed")
	return nil
}
