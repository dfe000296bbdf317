// Package broker is the router and the handlers: one file per API key
// (NN_name.go) turns a kmsg request into messages for actors and their
// replies into a kmsg response, and the wiring that starts the actors. It is
// the top layer: nothing below it (net/, actors/, messages/, state/,
// storage/, metrics/) imports it. Sub-packages: admin (the admin HTTP
// listener) and brokertest (real brokers for tests).
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"kaas/actors/cleaner"
	"kaas/actors/fence"
	"kaas/actors/partition"
	"kaas/actors/share"
	"kaas/actors/system"
	"kaas/broker/admin"
	"kaas/broker/auth"
	"kaas/broker/cluster"
	"kaas/broker/fetchsession"
	"kaas/broker/peers"
	"kaas/metrics"
	"kaas/net/server"
	"kaas/state/brokerconfig"
	"kaas/state/producers"
	"kaas/storage/durable"
	"kaas/storage/pids"
	"kaas/storage/topicstore"
)

// Broker is one running kaas broker.
type Broker struct {
	cfg     Config
	log     *slog.Logger
	sys     *system.System
	srv     *server.Server
	floors  *producers.Floors
	env     durable.Env // filesystem, corruption policy, failure metrics
	pids    *pids.Allocator
	metrics *metrics.Metrics
	cleaner *cleaner.Pool // the log cleaner's passes (log_cleaner.go)
	// requestMetrics: each API version's request metrics, looked up once.
	requestMetrics requestMetrics
	fence          *fence.Handle
	admin          *admin.Server
	sec            *auth.Security
	tls            *tlsFiles // nil without TLS listeners

	topicStore topicStore
	topicsMu   sync.Mutex // serialises topic creation, deletion and growth
	topics     topicRegistry
	// topicsVersion counts topic changes (consumer groups' regexes
	// record the version they resolved against).
	topicsVersion atomic.Int64
	// coord is the transaction and group coordinators (coordinators.go).
	coord atomic.Pointer[coordinators]
	// shares is the share coordinator (share_coordinator.go); nil in a
	// cluster.
	shares *share.Handle
	// shareConns are the connections watched for the share sessions
	// they opened (78_share_fetch.go).
	shareConns sync.Map
	// peers reaches the other brokers of a cluster (broker/peers).
	peers *peers.Client
	// fetchSessions are the incremental fetch sessions (KIP-227).
	fetchSessions *fetchsession.Cache

	// Broker configs: layers readers load without a lock; changes are
	// serialised by topicsMu, as they re-resolve every topic's configs.
	configStore configStore
	configs     atomic.Pointer[brokerconfig.Layers]
	// quotas are the client quotas (quotas.go), telemetry the KIP-714
	// client metrics (client_metrics.go).
	quotas    clientQuotas
	features  featureTable
	telemetry clientTelemetry
	groupCfg  groupConfigs

	// advertisedAddrs (listener name → address clients are told) is
	// written once, before ready is closed; readers go through
	// advertised().
	advertisedAddrs map[string]hostPort
	ready           chan struct{}
	clusterID       string
	started         time.Time

	// cluster is the ownership loop (broker/cluster, cluster_join.go);
	// nil in single-broker mode.
	cluster *cluster.Loop
	// peerSecret is the brokers' credential towards each other
	// (broker/auth/peer.go), from etcd.
	peerSecret string
	// slotLease is the lease each coordinator slot open here was claimed
	// under (cluster_view.go).
	slotLease slotLeases

	// heapRelease returns the heap a burst of partition opens freed to
	// the OS once the opens are over (heap_release.go).
	heapRelease heapRelease
	closeOnce   sync.Once
	closeErr    error
}

// Start recovers the data directory, spawns the actors and starts
// listening. It returns once clients can connect.
func Start(cfg Config) (*Broker, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if err := cfg.checkListeners(); err != nil {
		return nil, err
	}
	if cfg.FetchMaxBytes <= 0 {
		cfg.FetchMaxBytes = DefaultConfig().FetchMaxBytes
	}
	if cfg.FetchSessionSlots == 0 {
		cfg.FetchSessionSlots = DefaultConfig().FetchSessionSlots
	}
	if cfg.FetchSessionEviction <= 0 {
		cfg.FetchSessionEviction = DefaultConfig().FetchSessionEviction
	}
	env := durable.Env{FS: cfg.FS, DataDir: cfg.DataDir, SkipCorrupt: cfg.SkipCorrupt, Logger: cfg.Logger,
		Observer: storageObserver{cfg.Metrics}}.Or()
	if err := durable.MkdirAll(env.FS, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("creating data directory: %w", err)
	}
	b := &Broker{
		env:     env,
		cfg:     cfg,
		log:     cfg.Logger,
		sys:     system.New(cfg.Logger),
		floors:  producers.NewFloors(),
		metrics: cfg.Metrics,
		ready:   make(chan struct{}),
		started: time.Now(),
		fetchSessions: fetchsession.NewCache(cfg.FetchSessionSlots, cfg.FetchSessionEviction,
			cfg.Metrics.FetchSessions, cfg.Metrics.FetchSessionPartitions, cfg.Metrics.FetchSessionEvictions),
	}
	if err := b.openStores(); err != nil {
		// No actor was spawned yet; the system's clock still runs.
		b.sys.Shutdown()
		_ = b.leaveCluster()
		return nil, err
	}
	b.startCleaner()
	if err := b.startFence(); err != nil {
		b.stopActors()
		_ = b.leaveCluster()
		return nil, err
	}
	if err := b.loadTopics(); err != nil {
		b.stopActors()
		_ = b.leaveCluster()
		return nil, err
	}
	// A cluster broker opens them with no slot: it opens each slot it
	// claims (cluster_slots.go).
	if err := b.openCoordinators(); err != nil {
		b.stopActors()
		_ = b.leaveCluster()
		return nil, err
	}
	if err := b.startShares(); err != nil {
		b.stopActors()
		_ = b.leaveCluster()
		return nil, err
	}
	tlsCfg, err := b.startTLS()
	if err != nil {
		b.stopActors()
		return nil, err
	}
	b.srv, err = server.Listen(server.Config{
		Listeners:               b.serverListeners(tlsCfg),
		EventLoops:              cfg.EventLoops,
		MaxRequestBytes:         cfg.MaxRequestBytes,
		MaxUnauthenticatedBytes: cfg.SASLMaxReceiveBytes,
		MaxInflightPerConn:      cfg.MaxInflightPerCon,
		MaxConnections:          cfg.MaxConnections,
		MaxConnectionsPerIP:     cfg.MaxConnectionsPerIP,
		QueuedMaxRequestBytes:   cfg.QueuedMaxRequestBytes,
		ConnectionsMaxIdle:      cfg.ConnectionsMaxIdle,
		Logger:                  cfg.Logger,
		Metrics:                 b.metrics,
		Answered:                b.answered,
		TLSHandshake:            b.tlsHandshake,
	}, b)
	if err != nil {
		b.stopActors()
		_ = b.leaveCluster()
		return nil, err
	}
	err = b.setAdvertised()
	if err == nil {
		b.configs.Store(b.configs.Load().WithStatic(b.cfg.staticBrokerConfigs(b.listenersSpec(false), b.listenersSpec(true))))
	}
	close(b.ready)
	if err != nil {
		b.Close(context.Background())
		return nil, err
	}
	if err := b.startObservability(); err != nil {
		b.Close(context.Background())
		return nil, err
	}
	if err := b.startOwnership(); err != nil {
		b.Close(context.Background())
		return nil, err
	}
	return b, nil
}

// openStores reads what the broker starts from: the cluster id, the
// producer-id block, topic metadata, dynamic configs and security state.
func (b *Broker) openStores() error {
	var err error
	if len(b.cfg.ClusterEtcd) > 0 {
		// Before anything on the shared volume is touched: a second broker
		// with this id must not get that far.
		if err := b.joinCluster(); err != nil {
			return err
		}
	} else {
		if b.clusterID, err = loadClusterID(b.env); err != nil {
			return err
		}
		if b.topicStore, err = topicstore.OpenStore(b.env); err != nil {
			return err
		}
	}
	if b.pids, err = pids.Open(b.env, b.cfg.BrokerID); err != nil {
		return err
	}
	if err := b.loadBrokerConfigs(); err != nil {
		return err
	}
	if err := b.openQuotas(); err != nil {
		return err
	}
	if err := b.openFeatures(); err != nil {
		return err
	}
	if err := b.openClientMetrics(); err != nil {
		return err
	}
	if err := b.openGroupConfigs(); err != nil {
		return err
	}
	b.startExpiry()
	return b.startSecurity()
}

// startSecurity loads users and ACLs from the data directory.
func (b *Broker) startSecurity() (err error) {
	c := b.cfg
	b.sec, err = auth.Open(auth.Config{DataDir: c.DataDir, Authorizer: c.Authorizer, SuperUsers: c.SuperUsers,
		AllowEveryoneIfNoACL: c.AllowEveryoneIfNoACL, SASLMechanisms: c.SASLMechanisms,
		SASLPlainAllowInsecure: c.SASLPlainAllowInsecure, FailedAuthDelay: c.FailedAuthDelay,
		ConnectionsMaxReauth: c.ConnectionsMaxReauth, Logger: b.log, Metrics: b.metrics,
		Cluster: func() (string, bool) {
			if b.cluster == nil {
				return "", false
			}
			return b.peerSecret, true
		}})
	return err
}

// Addr is the address clients connect to (the first listener's bound
// address).
func (b *Broker) Addr() string { return b.srv.Addr().String() }

// ListenerAddr is the bound address of the named listener, "" if none.
func (b *Broker) ListenerAddr(name string) string {
	for i, l := range b.cfg.listeners() {
		if l.Name == name {
			return b.srv.Addrs()[i].String()
		}
	}
	return ""
}

// Advertised is the host:port the first listener's clients are told in
// metadata.
func (b *Broker) Advertised() string {
	host, port := b.advertised("")
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// draining is closed once the server stops taking requests. A request can
// be served before Start has stored b.srv (a client reconnecting the
// moment the port opens): ready orders the read after the store.
func (b *Broker) draining(gone <-chan struct{}) <-chan struct{} {
	select {
	case <-b.ready:
		return b.srv.Draining()
	case <-gone:
		return gone
	}
}

// advertised returns the address clients of the named listener are told
// to use ("" or an unknown name: the first listener's). The front end
// accepts connections a moment before it is known, so early requests
// wait.
func (b *Broker) advertised(listener string) (string, int32) {
	<-b.ready
	hp, ok := b.advertisedAddrs[listener]
	if !ok {
		hp = b.advertisedAddrs[b.cfg.listeners()[0].Name]
	}
	return hp.host, hp.port
}

// Failed delivers an error if the broker stops being reachable on its own
// (its network event loops or listener died); `kaas serve` then exits
// non-zero instead of living on deaf.
func (b *Broker) Failed() <-chan error { return b.srv.Failed() }

// DataDir is the broker's data directory.
func (b *Broker) DataDir() string { return b.cfg.DataDir }

// Metrics exposes the broker's metrics registry.
func (b *Broker) Metrics() *metrics.Metrics { return b.metrics }

// Actors exposes the actor system (inspector, tests).
func (b *Broker) Actors() *system.System { return b.sys }

// Close stops accepting, answers what is in flight, stops every actor (each
// partition fsyncs and closes its log) and returns. An error means not
// everything written could be made durable (a store was offline after a
// disk error, or its last fsync failed): `kaas serve` then exits non-zero.
func (b *Broker) Close(ctx context.Context) error {
	b.closeOnce.Do(func() {
		b.heapRelease.stop()
		errs := []error{b.stopAdmin(ctx)}
		// Hand every owned unit off first (stop, fsync, release its key),
		// so peers take over while this broker drains.
		b.stopOwnership()
		// Parked JoinGroup/SyncGroup calls would hold the server's drain
		// for a whole rebalance: answer them first.
		b.unloadGroups()
		if b.srv != nil {
			errs = append(errs, b.srv.Shutdown(ctx))
		}
		errs = append(errs, b.stopActors())
		errs = append(errs, b.leaveCluster())
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

func (b *Broker) stopActors() error {
	b.stopQuotas()
	b.stopShares()
	if b.cleaner != nil {
		b.cleaner.Close()
	}
	errs := []error{b.closeCoordinators()}
	b.stopFence()
	b.peers.Close()
	errs = append(errs, b.stopPartitions())
	b.sys.Shutdown()
	return errors.Join(errs...)
}

// stopPartitions stops every partition (fsync, snapshot, clean-shutdown
// marker), openPartitionsAtOnce at a time, for the reason openPartitions
// opens them so: closing is mostly waiting for fsyncs, and concurrent
// ones share the file system's journal commits. One after another,
// 100,000 idle partitions took about 14 minutes to close here.
func (b *Broker) stopPartitions() error {
	var parts []*partition.Handle
	for _, t := range b.topics.load().byName {
		for _, p := range t.parts {
			if p != nil {
				parts = append(parts, p)
			}
		}
	}
	errs := make([]error, len(parts))
	var next atomic.Int32
	var wg sync.WaitGroup
	for range min(len(parts), openPartitionsAtOnce) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(parts); i = int(next.Add(1) - 1) {
				errs[i] = parts[i].Stop(false)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
