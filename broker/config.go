package broker

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"kaas/metrics"
	"kaas/storage/vfs"
)

// Config is everything `kaas serve` can set.
type Config struct {
	Listen         string // host:port of the one PLAINTEXT listener when Listeners is empty
	AdvertisedAddr string // host:port the first listener's clients are told; defaults to the bound address
	// Listeners (Apache's listeners) replace Listen: each a name, a
	// security protocol and an address. AdvertisedListeners maps a name
	// to the host:port clients connected to it are told (advertised.
	// listeners). InterBrokerListener names the listener peer brokers use
	// (inter.broker.listener.name).
	Listeners           []Listener
	AdvertisedListeners map[string]string
	InterBrokerListener string
	// TLS listeners serve TLSCertFile/TLSKeyFile (PEM), re-read when they
	// change; TLSClientCAFile makes SSL listeners require client
	// certificates it signed (mutual TLS; the principal is the subject).
	TLSCertFile     string
	TLSKeyFile      string
	TLSClientCAFile string
	// InterBrokerTLSCAFile is the CA peers' certificates are verified
	// with when the inter-broker listener is TLS (default
	// TLSClientCAFile, else the system roots).
	InterBrokerTLSCAFile string
	DataDir              string
	BrokerID             int32
	AdminAddr            string // metrics and inspector HTTP listener; empty disables it
	Version              string // what the inspector names the build (kaas version)
	EventLoops           int
	MaxRequestBytes      int // socket.request.max.bytes
	MaxInflightPerCon    int
	// Connection and memory limits (Apache's max.connections,
	// max.connections.per.ip, queued.max.request.bytes; <= 0 unlimited).
	MaxConnections        int
	MaxConnectionsPerIP   int
	QueuedMaxRequestBytes int64
	// ConnectionsMaxIdle closes connections idle this long
	// (connections.max.idle.ms, 10 minutes; < 0 never).
	ConnectionsMaxIdle time.Duration
	// AllowClientTxnMarkers lets connections send WriteTxnMarkers when no
	// authorizer is configured (by default only brokers may, and kaas has
	// no inter-broker connections yet).
	AllowClientTxnMarkers bool
	// FetchMaxBytes caps every Fetch answer whatever it asks
	// (fetch.max.bytes, 55 MiB).
	FetchMaxBytes int32
	// FetchSessionSlots is how many incremental fetch sessions (KIP-227)
	// the broker keeps (max.incremental.fetch.session.cache.slots, 1000);
	// 0 takes the default, < 0 keeps none (every fetch is a full one).
	FetchSessionSlots int
	// FetchSessionEviction is how long a session must go unused before
	// any new one may take its slot, and how old it must be before one
	// with more partitions may (min.incremental.fetch.session.eviction.ms,
	// 2 minutes; 0 takes the default).
	FetchSessionEviction time.Duration

	AutoCreateTopics  bool
	DefaultPartitions int32

	// InternalTopicConfigs accepts Apache's test-only topic config
	// internal.segment.bytes (segments below segment.bytes' 1 MiB floor).
	// Off, a client that sets it gets INVALID_CONFIG as for any unknown
	// name. brokertest turns it on.
	InternalTopicConfigs bool

	// Log defaults for topics without overrides (Kafka's log.* broker configs).
	SegmentBytes    int64
	SegmentMs       int64
	RetentionMs     int64
	RetentionBytes  int64
	MaxMessageBytes int32
	// FlushInterval > 0 acknowledges produce before fsync and fsyncs on this
	// interval; 0 (default) fsyncs before every acknowledgement.
	FlushInterval          time.Duration
	RetentionCheckInterval time.Duration
	ProducerIDExpiration   time.Duration

	// Transactions (spec defaults: transaction.max.timeout.ms 900000,
	// abort interval 10 s, transactional.id.expiration.ms 7 days) and the
	// fence directory poll (2 s).
	TxnMaxTimeout             time.Duration
	TxnAbortInterval          time.Duration
	TransactionalIDExpiration time.Duration
	FencePollInterval         time.Duration
	// TxnPartitionVerification checks a producer's first transactional
	// batch on a partition against the coordinator (KIP-890 part 1,
	// transaction.partition.verification.enable, on by default in 3.7).
	TxnPartitionVerification bool
	// TransactionVersion is the level transaction.version is finalized at
	// until UpdateFeatures changes it (then the stored level wins): 2,
	// Apache 4.0's default, bumps the epoch at every EndTxn (KIP-890
	// part 2); 0 or 1 keeps every client on the classic protocol.
	TransactionVersion int16
	// TxnMarkerWait bounds how long a request that needs the previous
	// transaction's markers (InitProducerId, AddPartitionsToTxn, TV2's
	// implicit add, AddOffsetsToTxn, EndTxn) waits for them in the broker
	// before it is answered CONCURRENT_TRANSACTIONS (R-TXN-2), so the
	// client is not made to retry with a backoff meanwhile. An implicit
	// add waits until its Produce's own timeout instead.
	TxnMarkerWait time.Duration

	// Consumer groups (Apache's group.* and offsets.* broker configs).
	GroupInitialRebalanceDelay    time.Duration // group.initial.rebalance.delay.ms
	GroupMinSessionTimeout        time.Duration // group.min.session.timeout.ms
	GroupMaxSessionTimeout        time.Duration // group.max.session.timeout.ms
	GroupMaxSize                  int           // group.max.size; 0: unlimited
	OffsetsRetention              time.Duration // offsets.retention.minutes
	OffsetsRetentionCheckInterval time.Duration // offsets.retention.check.interval.ms
	OffsetMetadataMaxBytes        int           // offset.metadata.max.bytes

	// Security (docs/security.md). Authorizer turns ACL checks on
	// (Apache's authorizer.class.name); SuperUsers may do anything
	// (super.users); AllowEveryoneIfNoACL is allow.everyone.if.no.acl.found.
	Authorizer           bool
	SuperUsers           []string
	AllowEveryoneIfNoACL bool
	// SASLMechanisms are the mechanisms SASL listeners offer
	// (sasl.enabled.mechanisms); PLAIN only on TLS listeners unless
	// SASLPlainAllowInsecure. A failed authentication is answered and the
	// connection closed after FailedAuthDelay
	// (connection.failed.authentication.delay.ms). SASLMaxReceiveBytes
	// bounds a frame before authentication (sasl.server.max.receive.size).
	// ConnectionsMaxReauth > 0 ends a SASL session that long after it
	// authenticated unless the client re-authenticates on the connection
	// (KIP-368, connections.max.reauth.ms; 0, the default: never).
	SASLMechanisms         []string
	SASLPlainAllowInsecure bool
	FailedAuthDelay        time.Duration
	SASLMaxReceiveBytes    int
	ConnectionsMaxReauth   time.Duration
	// SkipCorrupt (--skip-corrupt): a store that finds corrupt data at
	// start-up moves the file to <data>/quarantine and goes on without it,
	// instead of refusing to start (docs/durability.md).
	SkipCorrupt bool
	// FS is the filesystem every store writes through; nil is the real
	// one (tests inject disk errors or simulate power loss).
	FS vfs.FS

	// KIP-848 consumer groups (Apache's group.consumer.* broker configs).
	ConsumerHeartbeatInterval time.Duration // group.consumer.heartbeat.interval.ms
	ConsumerSessionTimeout    time.Duration // group.consumer.session.timeout.ms
	ConsumerAssignors         []string      // group.consumer.assignors
	ConsumerMaxSize           int           // group.consumer.max.size; 0: unlimited
	ConsumerMigrationPolicy   string        // group.consumer.migration.policy

	// Share groups (KIP-932; Apache's group.share.* broker configs).
	// ShareAutoOffsetReset and ShareIsolationLevel are Apache's group
	// configs share.auto.offset.reset and share.isolation.level, set here
	// for every share group: kaas has no per-group configs yet.
	ShareHeartbeatInterval       time.Duration // group.share.heartbeat.interval.ms
	ShareSessionTimeout          time.Duration // group.share.session.timeout.ms
	ShareRecordLockDuration      time.Duration // group.share.record.lock.duration.ms
	ShareDeliveryCountLimit      int           // group.share.delivery.count.limit
	SharePartitionMaxRecordLocks int           // group.share.partition.max.record.locks
	ShareMaxSize                 int           // group.share.max.size
	ShareMaxSessions             int           // group.share.max.share.sessions
	ShareAutoOffsetReset         string        // share.auto.offset.reset: latest or earliest
	ShareIsolationLevel          string        // share.isolation.level: read_uncommitted or read_committed

	// Cluster mode (issue 10): with ClusterEtcd set, brokers sharing
	// DataDir coordinate through etcd (see coord and broker/cluster).
	ClusterEtcd []string      // --cluster-etcd: etcd client URLs
	ClusterName string        // --cluster-name: the cluster's key prefix in etcd
	SessionTTL  time.Duration // --session-ttl: the broker's etcd lease
	Rack        string        // --rack: registered with the broker

	// Client quotas (quotas.go): each rate is measured over
	// QuotaWindowNum samples of QuotaWindowSize (quota.window.num 11,
	// quota.window.size.seconds 1). TelemetryMaxBytes bounds a KIP-714
	// push (telemetry.max.bytes, 1 MiB).
	QuotaWindowNum    int
	QuotaWindowSize   time.Duration
	TelemetryMaxBytes int

	Logger *slog.Logger
	// Metrics receives the broker's measurements; nil creates a fresh
	// registry.
	Metrics *metrics.Metrics

	testHooks *testHooks // package-internal tests only (test_hooks.go)
}

// defaultQueuedMaxRequestBytes is kaas's default for
// queued.max.request.bytes. Apache's is -1 (unbounded, leaving only the
// JVM heap); kaas bounds request memory by default: 512 MiB is five
// maximum-size (100 MiB) requests, or 500 concurrent 1 MiB produce
// requests, before connections stop being read.
const defaultQueuedMaxRequestBytes = 512 << 20

// DefaultConfig is what `kaas serve` runs with when no flag is given.
func DefaultConfig() Config {
	return Config{
		Listen:                 "127.0.0.1:9092",
		DataDir:                "./data",
		AdminAddr:              "127.0.0.1:9644",
		EventLoops:             1,
		MaxRequestBytes:        100 << 20,
		MaxInflightPerCon:      32,
		MaxConnections:         2147483647, // Apache's default: Int.MaxValue
		MaxConnectionsPerIP:    2147483647,
		QueuedMaxRequestBytes:  defaultQueuedMaxRequestBytes,
		ConnectionsMaxIdle:     10 * time.Minute,
		FetchMaxBytes:          55 << 20,
		FetchSessionSlots:      1000,
		FetchSessionEviction:   2 * time.Minute,
		AutoCreateTopics:       true,
		DefaultPartitions:      1,
		SegmentBytes:           1 << 30,
		SegmentMs:              7 * 24 * 3600 * 1000,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		MaxMessageBytes:        1048588,
		RetentionCheckInterval: 5 * time.Minute,
		ProducerIDExpiration:   24 * time.Hour,

		TxnMaxTimeout:             900 * time.Second,
		TxnAbortInterval:          10 * time.Second,
		TransactionalIDExpiration: 7 * 24 * time.Hour,
		FencePollInterval:         2 * time.Second,
		TxnPartitionVerification:  true,
		TransactionVersion:        2,
		TxnMarkerWait:             5 * time.Second,

		GroupInitialRebalanceDelay:    3 * time.Second,
		GroupMinSessionTimeout:        6 * time.Second,
		GroupMaxSessionTimeout:        30 * time.Minute,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		OffsetMetadataMaxBytes:        4096,

		SASLMechanisms:      []string{"SCRAM-SHA-256", "SCRAM-SHA-512"},
		FailedAuthDelay:     100 * time.Millisecond,
		SASLMaxReceiveBytes: 524288,

		ConsumerHeartbeatInterval: 5 * time.Second,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerAssignors:         []string{"uniform", "range"},
		ConsumerMigrationPolicy:   "bidirectional",

		ShareHeartbeatInterval:       5 * time.Second,
		ShareSessionTimeout:          45 * time.Second,
		ShareRecordLockDuration:      30 * time.Second,
		ShareDeliveryCountLimit:      5,
		SharePartitionMaxRecordLocks: 2000,
		ShareMaxSize:                 200,
		ShareMaxSessions:             2000,
		ShareAutoOffsetReset:         "latest",
		ShareIsolationLevel:          "read_uncommitted",

		ClusterName: "kaas",
		SessionTTL:  6 * time.Second,

		QuotaWindowNum:    11,
		QuotaWindowSize:   time.Second,
		TelemetryMaxBytes: 1 << 20,
	}
}

// staticBrokerConfigs are the broker configs (Apache names) this
// configuration sets explicitly, for DescribeConfigs' STATIC_BROKER_CONFIG
// source: the ones whose value differs from DefaultConfig's, plus the
// identity and listeners (NAME://host:port,...) every broker has.
func (c Config) staticBrokerConfigs(listen, advertised string) map[string]string {
	d := DefaultConfig()
	out := map[string]string{
		"broker.id":            strconv.Itoa(int(c.BrokerID)),
		"node.id":              strconv.Itoa(int(c.BrokerID)),
		"listeners":            listen,
		"advertised.listeners": advertised,
		"log.dirs":             c.DataDir,
	}
	set := func(name string, v, def any) {
		if v != def {
			out[name] = fmt.Sprint(v)
		}
	}
	set("log.segment.bytes", c.SegmentBytes, d.SegmentBytes)
	set("log.roll.ms", c.SegmentMs, d.SegmentMs)
	set("log.retention.ms", c.RetentionMs, d.RetentionMs)
	set("log.retention.bytes", c.RetentionBytes, d.RetentionBytes)
	set("message.max.bytes", c.MaxMessageBytes, d.MaxMessageBytes)
	set("num.partitions", c.DefaultPartitions, d.DefaultPartitions)
	set("auto.create.topics.enable", c.AutoCreateTopics, d.AutoCreateTopics)
	set("socket.request.max.bytes", c.MaxRequestBytes, d.MaxRequestBytes)
	set("max.connections", c.MaxConnections, d.MaxConnections)
	set("max.connections.per.ip", c.MaxConnectionsPerIP, d.MaxConnectionsPerIP)
	set("queued.max.request.bytes", c.QueuedMaxRequestBytes, d.QueuedMaxRequestBytes)
	set("connections.max.idle.ms", c.ConnectionsMaxIdle.Milliseconds(), d.ConnectionsMaxIdle.Milliseconds())
	set("fetch.max.bytes", c.FetchMaxBytes, d.FetchMaxBytes)
	set("max.incremental.fetch.session.cache.slots", max(c.FetchSessionSlots, 0), d.FetchSessionSlots)
	set("min.incremental.fetch.session.eviction.ms", c.FetchSessionEviction.Milliseconds(), d.FetchSessionEviction.Milliseconds())
	set("num.network.threads", c.EventLoops, d.EventLoops)
	set("log.retention.check.interval.ms", c.RetentionCheckInterval.Milliseconds(), d.RetentionCheckInterval.Milliseconds())
	set("producer.id.expiration.ms", c.ProducerIDExpiration.Milliseconds(), d.ProducerIDExpiration.Milliseconds())
	set("quota.window.num", c.QuotaWindowNum, d.QuotaWindowNum)
	set("quota.window.size.seconds", int64(c.QuotaWindowSize/time.Second), int64(d.QuotaWindowSize/time.Second))
	set("telemetry.max.bytes", c.TelemetryMaxBytes, d.TelemetryMaxBytes)
	if c.InterBrokerListener != "" {
		out["inter.broker.listener.name"] = c.InterBrokerListener
	}
	if c.Authorizer {
		out["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		out["allow.everyone.if.no.acl.found"] = strconv.FormatBool(c.AllowEveryoneIfNoACL)
		if len(c.SuperUsers) > 0 {
			out["super.users"] = strings.Join(c.SuperUsers, ";")
		}
	}
	out["sasl.enabled.mechanisms"] = strings.Join(c.SASLMechanisms, ",")
	set("connection.failed.authentication.delay.ms", c.FailedAuthDelay.Milliseconds(), d.FailedAuthDelay.Milliseconds())
	set("sasl.server.max.receive.size", c.SASLMaxReceiveBytes, d.SASLMaxReceiveBytes)
	set("connections.max.reauth.ms", c.ConnectionsMaxReauth.Milliseconds(), d.ConnectionsMaxReauth.Milliseconds())

	set("group.consumer.heartbeat.interval.ms", c.ConsumerHeartbeatInterval.Milliseconds(), d.ConsumerHeartbeatInterval.Milliseconds())
	set("group.consumer.session.timeout.ms", c.ConsumerSessionTimeout.Milliseconds(), d.ConsumerSessionTimeout.Milliseconds())
	set("group.consumer.assignors", strings.Join(c.ConsumerAssignors, ","), strings.Join(d.ConsumerAssignors, ","))
	if c.ConsumerMaxSize > 0 {
		out["group.consumer.max.size"] = strconv.Itoa(c.ConsumerMaxSize)
	}
	set("group.consumer.migration.policy", c.ConsumerMigrationPolicy, d.ConsumerMigrationPolicy)
	set("group.share.heartbeat.interval.ms", c.ShareHeartbeatInterval.Milliseconds(), d.ShareHeartbeatInterval.Milliseconds())
	set("group.share.session.timeout.ms", c.ShareSessionTimeout.Milliseconds(), d.ShareSessionTimeout.Milliseconds())
	set("group.share.record.lock.duration.ms", c.ShareRecordLockDuration.Milliseconds(), d.ShareRecordLockDuration.Milliseconds())
	set("group.share.delivery.count.limit", c.ShareDeliveryCountLimit, d.ShareDeliveryCountLimit)
	set("group.share.partition.max.record.locks", c.SharePartitionMaxRecordLocks, d.SharePartitionMaxRecordLocks)
	set("group.share.max.size", c.ShareMaxSize, d.ShareMaxSize)
	set("group.share.max.share.sessions", c.ShareMaxSessions, d.ShareMaxSessions)
	if c.FlushInterval > 0 {
		// Acknowledged before fsync, fsynced every N ms: Kafka's own model.
		out["log.flush.interval.ms"] = strconv.FormatInt(c.FlushInterval.Milliseconds(), 10)
		out["log.flush.interval.messages"] = "9223372036854775807"
	}
	return out
}
