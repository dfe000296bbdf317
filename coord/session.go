package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kaas/state/lease"
)

// Config is what a broker's session needs.
type Config struct {
	Endpoints  []string // etcd client URLs (--cluster-etcd)
	Cluster    string   // --cluster-name: the key prefix, so clusters can share an etcd
	BrokerID   int32
	Advertised string // host:port clients are told to use
	// Listeners maps each listener's name to the host:port advertised
	// for it (Metadata answers a client with the addresses of the
	// listener it connected to; peers dial the inter-broker one).
	Listeners map[string]string
	Rack      string
	// SessionTTL is the lease TTL (--session-ttl, whole seconds, ≥ 1 s).
	SessionTTL time.Duration
	// Margin is taken off the deadline (default lease.DefaultMargin).
	Margin      time.Duration
	DialTimeout time.Duration // default 5 s
	Logger      *slog.Logger
}

// Member is a live broker as registered in etcd.
type Member struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// Listeners: listener name → advertised host:port.
	Listeners map[string]string `json:"listeners,omitempty"`
}

// On is the member's address for the named listener: the one advertised
// for it, else its first listener's.
func (m Member) On(listener string) (string, int32) {
	if hp, ok := m.Listeners[listener]; ok {
		if host, port, err := net.SplitHostPort(hp); err == nil {
			p, _ := strconv.Atoi(port)
			return host, int32(p)
		}
	}
	return m.Host, m.Port
}

// LeaseID names one grant of a broker's session lease; a lease lost and
// granted again is a different LeaseID.
type LeaseID = clientv3.LeaseID

// ErrDuplicateBroker is returned by Join when a live broker already holds
// the id.
var ErrDuplicateBroker = errors.New("broker id already registered by a live broker")

// Session is one broker's membership: an etcd lease, kept alive, under
// which the broker's registration and owner keys live. Deadline is the
// instant the broker must stop acting as an owner by.
type Session struct {
	cfg  Config
	cl   *clientv3.Client
	keys keys
	log  *slog.Logger
	self Member

	mu       sync.Mutex
	leaseID  clientv3.LeaseID
	deadline *lease.Deadline
	// epochStart anchors the deadline to the monotonic clock. cur is the
	// lease and its deadline as one value: AliveUnder is read on every
	// append and acknowledgement, so it is one atomic load, and a lease
	// and a deadline of two different leases are never read together.
	epochStart time.Time
	cur        atomic.Pointer[leaseNow]

	renewals atomic.Int64
	failures atomic.Int64

	onLost    func() // called (once per loss) when the lease is known gone
	closeOnce sync.Once
	closeErr  error
	stop      chan struct{}
	done      chan struct{}
}

// Join connects to etcd, grants the lease, registers the broker and
// starts keeping the lease alive. It fails with a clear error when etcd
// cannot be reached or the id is taken by a live broker.
func Join(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.SessionTTL < time.Second {
		return nil, fmt.Errorf("session TTL %v: etcd leases count whole seconds, at least 1s", cfg.SessionTTL)
	}
	cfg.SessionTTL = cfg.SessionTTL.Round(time.Second)
	if cfg.Margin <= 0 {
		cfg.Margin = lease.DefaultMargin(cfg.SessionTTL)
	}
	if cfg.Cluster == "" {
		return nil, errors.New("a cluster name is required")
	}
	host, port, err := net.SplitHostPort(cfg.Advertised)
	if err != nil {
		return nil, fmt.Errorf("advertised address %q: %w", cfg.Advertised, err)
	}
	p, _ := strconv.Atoi(port)
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      quietZap(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", cfg.Endpoints, err)
	}
	s := &Session{
		cfg: cfg, cl: cl, keys: newKeys(cfg.Cluster),
		log:        cfg.Logger.With("component", "cluster"),
		self:       Member{ID: cfg.BrokerID, Host: host, Port: int32(p), Rack: cfg.Rack, Listeners: cfg.Listeners},
		deadline:   lease.New(cfg.Margin),
		epochStart: time.Now(),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	reach, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err = cl.Get(reach, s.keys.clusterID())
	cancel()
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot reach etcd at %v within %v: %w", cfg.Endpoints, cfg.DialTimeout, err)
	}
	if err := s.register(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	go s.keepAlive()
	return s, nil
}

// register grants a fresh lease and creates brokers/<id> under it, only
// if no live broker holds the id.
func (s *Session) register(ctx context.Context) error {
	sent := time.Now()
	g, err := s.cl.Grant(ctx, int64(s.cfg.SessionTTL/time.Second))
	if err != nil {
		return fmt.Errorf("granting the session lease: %w", err)
	}
	val, _ := json.Marshal(s.self)
	key := s.keys.broker(s.self.ID)
	resp, err := s.cl.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		_, _ = s.cl.Revoke(context.Background(), g.ID)
		return fmt.Errorf("registering broker %d: %w", s.self.ID, err)
	}
	if !resp.Succeeded {
		_, _ = s.cl.Revoke(context.Background(), g.ID)
		holder := "another process"
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			var m Member
			if json.Unmarshal(kvs[0].Value, &m) == nil {
				holder = net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))
			}
		}
		return fmt.Errorf("%w: broker id %d is held by the broker at %s in cluster %q; give this broker another --broker-id, or wait up to %v if that broker just died",
			ErrDuplicateBroker, s.self.ID, holder, s.cfg.Cluster, s.cfg.SessionTTL)
	}
	s.mu.Lock()
	s.leaseID = g.ID
	s.renewedLocked(sent, time.Duration(g.TTL)*time.Second)
	s.mu.Unlock()
	s.log.Info("joined the cluster", "cluster", s.cfg.Cluster, "broker_id", s.self.ID, "lease", fmt.Sprintf("%x", g.ID), "ttl", s.cfg.SessionTTL)
	return nil
}

// leaseNow is a lease and the instant acting under it must stop by.
type leaseNow struct {
	id clientv3.LeaseID
	// until is nanoseconds since epochStart; 0: not alive.
	until int64
}

func (s *Session) renewedLocked(sent time.Time, ttl time.Duration) {
	s.deadline.Renewed(sent, ttl)
	now := &leaseNow{id: s.leaseID}
	if until := s.deadline.Until(); !until.IsZero() {
		now.until = int64(until.Sub(s.epochStart))
	}
	s.cur.Store(now)
}

// keepAlive renews the lease every third of the TTL, timing each renewal
// from the moment it was sent. A lease etcd no longer knows is lost: the
// broker is told (OnLost) and registers afresh with a new lease.
func (s *Session) keepAlive() {
	defer close(s.done)
	interval := s.cfg.SessionTTL / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		id := s.leaseID
		s.mu.Unlock()
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		resp, err := s.cl.KeepAliveOnce(ctx, id)
		cancel()
		next := interval
		switch {
		case err == nil:
			s.renewals.Add(1)
			s.mu.Lock()
			s.renewedLocked(sent, time.Duration(resp.TTL)*time.Second)
			s.mu.Unlock()
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.failures.Add(1)
			s.lost() // returns once the broker has stopped the lease's units
			select {
			case <-s.stop:
				return
			default:
			}
			if err := s.register(context.Background()); err != nil {
				s.log.Error("re-registering after the lease was lost", "err", err)
				next = time.Second
			}
		default:
			s.failures.Add(1)
			s.log.Warn("lease keep-alive failed; acting stops at the deadline unless a renewal succeeds",
				"err", err, "remaining", s.Remaining())
			next = interval / 3
		}
		t.Reset(next)
	}
}

// lost forgets the lease: nothing is owned any more. The units claimed
// under it stop acknowledging at once (AliveUnder is false for it from
// now on, whatever lease comes next), and the broker is told before a new
// lease is granted.
func (s *Session) lost() {
	s.mu.Lock()
	s.deadline.Lost()
	s.leaseID = 0
	s.cur.Store(nil)
	cb := s.onLost
	s.mu.Unlock()
	s.log.Error("session lease lost: every unit this broker owned is given up")
	if cb != nil {
		cb()
	}
}

// OnLost sets the function called when the lease is known to be gone
// (its keys, owner keys included, are gone with it). A new lease is
// granted only once it returns: the broker stops every unit of the lost
// lease in it, before anything is claimed under the next one.
func (s *Session) OnLost(fn func()) {
	s.mu.Lock()
	s.onLost = fn
	s.mu.Unlock()
}

// Alive reports whether the session holds a lease that is certainly
// alive now. It says nothing about units claimed under an earlier lease:
// a unit asks AliveUnder with the lease it was claimed with.
func (s *Session) Alive() bool {
	now := s.cur.Load()
	return now != nil && s.aliveAt(now)
}

// AliveUnder reports whether lease id is this session's lease and is
// certainly alive now: a unit (a partition, a coordinator slot) claimed
// under id may append and acknowledge only while it is. A lease granted
// after id was lost does not count — its owner keys are not the unit's.
func (s *Session) AliveUnder(id clientv3.LeaseID) bool {
	now := s.cur.Load()
	return now != nil && now.id == id && id != 0 && s.aliveAt(now)
}

func (s *Session) aliveAt(now *leaseNow) bool {
	return now.until != 0 && int64(time.Since(s.epochStart)) < now.until
}

// Deadline is the instant acting must stop by (zero without a lease).
func (s *Session) Deadline() time.Time {
	now := s.cur.Load()
	if now == nil || now.until == 0 {
		return time.Time{}
	}
	return s.epochStart.Add(time.Duration(now.until))
}

// Remaining is how long the broker may still act without a renewal.
func (s *Session) Remaining() time.Duration {
	now := s.cur.Load()
	if now == nil || now.until == 0 {
		return 0
	}
	return time.Duration(now.until) - time.Since(s.epochStart)
}

// Lease is the current lease id (0 while lost).
func (s *Session) Lease() clientv3.LeaseID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaseID
}

// Self is this broker's registration.
func (s *Session) Self() Member { return s.self }

// TTL is the session TTL.
func (s *Session) TTL() time.Duration { return s.cfg.SessionTTL }

// Renewals and Failures count keep-alives (metrics).
func (s *Session) Renewals() int64 { return s.renewals.Load() }

// Failures counts keep-alives that failed.
func (s *Session) Failures() int64 { return s.failures.Load() }

// Client is the etcd client (the view and the stores share it).
func (s *Session) Client() *clientv3.Client { return s.cl }

// Close stops the keep-alives and revokes the lease, so peers see this
// broker leave at once instead of after the TTL. Callers release their
// units first.
func (s *Session) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Session) close() error {
	close(s.stop)
	<-s.done
	id := s.Lease()
	var err error
	if id != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = s.cl.Revoke(ctx, id)
		cancel()
	}
	s.mu.Lock()
	s.deadline.Lost()
	s.cur.Store(nil)
	s.mu.Unlock()
	return errors.Join(err, s.cl.Close())
}
