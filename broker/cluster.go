package broker

// Cluster mode (issue 10): N brokers on one shared data volume,
// coordinated by etcd through coord. etcd is the only source of truth for
// who owns what: a broker opens a partition's actor (and so touches its
// files) only while it holds the partition's owner key, created in an
// etcd transaction under its lease, which also raises the leader epoch.
// Ownership is balanced by rendezvous hashing over the live brokers
// (state/ownership); the ownership loop below claims what this broker
// should own once the previous owner's key is gone, and hands off what a
// joining broker should own (stop, fsync, release).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/partition"
	"kaas/coord"
	"kaas/model/slots"
	"kaas/state/ownership"
	"kaas/state/topics"
	"kaas/storage/topicstore"
)

// topicStore is where topic metadata lives: files on the volume
// (topicstore.Store) for one broker, etcd (coord.TopicStore) in a cluster.
type topicStore interface {
	Save(topicstore.Topic) error
	Delete(name string) error
	Load() ([]topicstore.Topic, error)
}

// configStore is where the dynamic broker config layers live.
type configStore interface {
	Load(perBroker bool) (map[string]string, error)
	Save(perBroker bool, values map[string]string) error
}

// clusterMode is the broker's cluster state. owned is touched only by the
// ownership loop (and Close once the loop has stopped).
type clusterMode struct {
	sess *coord.Session
	// watch is set once the broker serves (startOwnership); Metadata
	// handlers read it from the start.
	watch atomic.Pointer[coord.Watcher]

	kick chan struct{}
	// lost carries the session's lease-lost callback to the loop: the loop
	// stops every unit of the lost lease, then closes the channel it got,
	// and only then is a new lease granted (coord.Session.OnLost).
	lost chan chan struct{}
	stop chan struct{}
	done chan struct{}

	owned map[string]ownedUnit
	// retryAt holds back a unit whose open failed: claiming it again at
	// once would raise its leader epoch (and seal its segment) on every
	// reconcile, tens of times a second. Loop only.
	retryAt  map[string]openRetry
	handoffs atomic.Int64 // units released to a peer
	takeover atomic.Int64 // units claimed
	ownedN   atomic.Int64
	// settled: the last reconcile left nothing this broker should own
	// unclaimed or unopened (readiness).
	settled atomic.Bool

	// peerSecret is the brokers' credential towards each other
	// (broker/auth/peer.go).
	peerSecret string

	mu      sync.Mutex
	epochs  map[string]int32 // unit → leader epoch, for units open here
	started bool

	// slotLease is the lease each coordinator slot open here was claimed
	// under (0: not open), [0] transaction slots, [1] offsets slots: a
	// slot's writes are acknowledged only while that lease is certainly
	// alive (slotAlive).
	slotLease [2][slots.Count]atomic.Int64
}

type ownedUnit struct {
	epoch int32
	rev   int64         // etcd revision of the claim
	lease coord.LeaseID // the lease the owner key was created under
}

// errClaimGone: the lease a unit was claimed under is not certainly alive
// any more; nothing of the unit is opened.
var errClaimGone = errors.New("the lease this unit was claimed under is gone; not opened")

// openRetry is a unit whose open failed: not claimed again before at.
type openRetry struct {
	at    time.Time
	delay time.Duration
}

// Backoff of a unit whose open failed: doubling from the first to the
// last.
const (
	openRetryFirst = 250 * time.Millisecond
	openRetryMax   = 30 * time.Second
)

// joinCluster connects to etcd, registers this broker (refusing a
// duplicate id) and switches topic and config metadata to etcd.
func (b *Broker) joinCluster() error {
	addrs, err := b.clusterAddrs()
	if err != nil {
		return err
	}
	adv := addrs[b.cfg.listeners()[0].Name]
	sess, err := coord.Join(context.Background(), coord.Config{
		Endpoints:  b.cfg.ClusterEtcd,
		Cluster:    b.cfg.ClusterName,
		BrokerID:   b.cfg.BrokerID,
		Advertised: adv,
		Listeners:  addrs,
		Rack:       b.cfg.Rack,
		SessionTTL: b.cfg.SessionTTL,
		Logger:     b.log,
	})
	if err != nil {
		return err
	}
	if b.clusterID, err = sess.ClusterID(); err != nil {
		_ = sess.Close()
		return err
	}
	b.cluster = &clusterMode{
		sess: sess, kick: make(chan struct{}, 1), lost: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		owned: map[string]ownedUnit{}, retryAt: map[string]openRetry{}, epochs: map[string]int32{},
	}
	b.topicStore = sess.Topics()
	b.configStore = sess.Configs()
	if b.cluster.peerSecret, err = sess.PeerSecret(); err != nil {
		_ = sess.Close()
		return err
	}
	if b.peers, err = b.newPeers(addrs); err != nil {
		_ = sess.Close()
		return err
	}
	return nil
}

// clusterAddrs is the address each listener advertises, registered in
// etcd for clients and peers: --advertised-listeners' (the first
// listener: also --advertised-listener), else the bound address, whose
// port must then be fixed.
func (b *Broker) clusterAddrs() (map[string]string, error) {
	out := map[string]string{}
	for i, l := range b.cfg.listeners() {
		adv := b.cfg.AdvertisedListeners[l.Name]
		if adv == "" && i == 0 {
			adv = b.cfg.AdvertisedAddr
		}
		if adv == "" {
			adv = l.Addr
		}
		if _, port, err := net.SplitHostPort(adv); err != nil || port == "0" {
			return nil, fmt.Errorf("cluster mode needs the address peers and clients reach listener %s at: give --advertised-listeners, or a fixed port (got %q)", l.Name, adv)
		}
		out[l.Name] = adv
	}
	return out, nil
}

// leaveCluster revokes the session (peers see this broker leave at once).
func (b *Broker) leaveCluster() error {
	if b.cluster == nil {
		return nil
	}
	return b.cluster.sess.Close()
}

// startOwnership starts following etcd and claiming this broker's share.
func (b *Broker) startOwnership() error {
	cm := b.cluster
	if cm == nil {
		return nil
	}
	w, err := cm.sess.Watch(func(old, cur *coord.View) {
		b.applyTopicView(cur)
		if old.EntitiesRev != cur.EntitiesRev {
			b.applyEntityViews(cur)
		}
		select {
		case cm.kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return fmt.Errorf("watching the cluster: %w", err)
	}
	cm.watch.Store(w)
	b.applyTopicView(w.View())
	b.applyEntityViews(w.View())
	cm.sess.OnLost(func() {
		// Every unit of the lost lease is stopped before anything else
		// happens: its gate is closed already (AliveUnder), and the
		// loop releases it before a new lease is granted. Bounded, so a
		// loop stuck in a slow close cannot keep the broker out of the
		// cluster for ever.
		stopped := make(chan struct{})
		select {
		case cm.lost <- stopped:
		case <-cm.stop:
			return
		}
		select {
		case <-stopped:
		case <-cm.stop:
		case <-time.After(cm.sess.TTL()):
			b.log.Warn("units of the lost lease still stopping; joining again", "ttl", cm.sess.TTL())
		}
	})
	cm.started = true
	b.metrics.RegisterCluster(clusterSource{cm, b.peers})
	go b.ownershipLoop()
	return nil
}

// stopOwnership stops the loop and hands every owned unit off.
func (b *Broker) stopOwnership() {
	cm := b.cluster
	if cm == nil || !cm.started {
		return
	}
	cm.settled.Store(false)
	close(cm.stop)
	<-cm.done
	cm.watch.Load().Stop()
	// Every unit is fsynced and closed; its owner key is deleted while
	// etcd answers. Once a delete fails (etcd gone: make cluster's Ctrl-C
	// stops etcd with the brokers) the rest are left to the lease rather
	// than each waiting out its own timeout, which kept a broker with a
	// hundred units in its shutdown for a quarter of an hour.
	keys := true
	for _, unit := range sortedUnits(cm.owned) {
		keys = b.releaseUnit(unit, true, keys)
	}
}

// ownershipLoop reconciles on every change of the cluster view and at
// least every second (a claim that lost a race is retried).
func (b *Broker) ownershipLoop() {
	cm := b.cluster
	defer close(cm.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		b.reconcile()
		select {
		case <-cm.stop:
			return
		case stopped := <-cm.lost:
			b.reconcile() // the lease is gone: releases every unit
			close(stopped)
		case <-cm.kick:
		case <-t.C:
		}
	}
}

// reconcile makes this broker's open units match what it should own.
func (b *Broker) reconcile() {
	cm := b.cluster
	v := cm.watch.Load().View()
	self := b.cfg.BrokerID
	// A lost lease took every owner key made under it: stop each unit
	// claimed under a lease that is not the session's now — whether no
	// lease is held or a new one has been granted since.
	lease := cm.sess.Lease()
	for _, unit := range sortedUnits(cm.owned) {
		if cm.owned[unit].lease != lease {
			b.log.Warn("the lease this unit was claimed under is gone; stopping it", "unit", unit)
			b.release(unit, false)
		}
	}
	if lease == 0 {
		cm.settled.Store(false)
		return
	}
	members := v.MemberIDs()
	want := map[string]bool{}
	// Rendezvous hashing decides, unless an operator reassigned the unit
	// (reassignments.go).
	for _, u := range slotUnits() {
		if preferredOwner(v, u, members) == self {
			want[u] = true
		}
	}
	for _, t := range v.Topics {
		for p := int32(0); p < t.Partitions; p++ {
			u := ownership.PartitionUnit(t.Name, p)
			if preferredOwner(v, u, members) == self {
				want[u] = true
			}
		}
	}
	b.releaseLeftKeys(v)
	// Units this broker holds: keep, hand off, or drop if the key is gone.
	for _, unit := range sortedUnits(cm.owned) {
		o, keyed := v.Owners[unit]
		if v.Rev < cm.owned[unit].rev {
			continue // the view predates our claim: it cannot show our key yet
		}
		switch {
		case keyed && o.Broker == self && want[unit]:
		case keyed && o.Broker == self:
			b.release(unit, true) // graceful hand-off to the preferred broker
		default:
			// The key is gone or someone else's: the view is newer than
			// our lease (expired and re-granted). Stop at once.
			b.log.Warn("owner key no longer ours; stopping the unit", "unit", unit)
			b.release(unit, false)
		}
	}
	pending := 0
	var claimable []coord.Prior
	for _, unit := range sortedUnits(want) {
		if _, have := cm.owned[unit]; have {
			continue
		}
		pending++
		if _, keyed := v.Owners[unit]; keyed {
			continue // the previous owner's key still exists: wait for it to go
		}
		if r, held := cm.retryAt[unit]; held && time.Now().Before(r.at) {
			continue // its last open failed: not yet
		}
		e, known := v.Epochs[unit]
		claimable = append(claimable, coord.Prior{Unit: unit, Epoch: e, Known: known})
	}
	if len(claimable) > 0 && cm.sess.Alive() {
		pending -= b.claim(claimable)
	}
	cm.settled.Store(pending == 0)
}

// releaseLeftKeys deletes again this broker's owner keys for units it no
// longer holds: a hand-off whose delete failed (etcd unreachable just
// then: "it goes with the lease") left the key under a lease that lives
// on, and the preferred owner would wait for it as long as this broker
// runs. The delete is conditional on the key naming this broker at that
// epoch, so a claim made since by anyone is never removed. Keys under a
// lost lease vanish by themselves; only the current lease's are tried.
func (b *Broker) releaseLeftKeys(v *coord.View) {
	cm := b.cluster
	if !cm.sess.Alive() {
		return
	}
	for _, unit := range sortedUnits(v.Owners) {
		o := v.Owners[unit]
		if _, held := cm.owned[unit]; held || o.Broker != b.cfg.BrokerID {
			continue
		}
		if err := cm.sess.Release(unit, o.Epoch); err != nil {
			b.log.Warn("deleting an owner key left behind failed; retrying", "unit", unit, "leader_epoch", o.Epoch, "err", err)
			return // etcd is not answering: the next reconcile tries again
		}
		b.log.Info("deleted an owner key left behind by a hand-off", "unit", unit, "leader_epoch", o.Epoch)
	}
}

// claim takes the owner keys of units in as few etcd transactions as it
// can (a failover claims a dead broker's whole share at once) and opens
// each unit it got. It returns how many it opened; a unit it did not get
// (someone else's key, or an epoch newer than the view) is tried again on
// a later reconcile.
func (b *Broker) claim(units []coord.Prior) int {
	cm := b.cluster
	got, err := cm.sess.ClaimAll(units)
	if err != nil {
		b.log.Warn("claiming units failed; retrying", "units", len(units), "claimed", len(got), "err", err)
	}
	opened := 0
	for _, c := range got {
		if !c.OK {
			continue
		}
		if err := b.openUnit(c.Unit, c.Epoch, c.Lease); err != nil {
			r := cm.retryAt[c.Unit]
			r.delay = min(max(2*r.delay, openRetryFirst), openRetryMax)
			r.at = time.Now().Add(r.delay)
			cm.retryAt[c.Unit] = r
			b.log.Error("opening a claimed unit failed; releasing it", "unit", c.Unit, "epoch", c.Epoch, "retry_in", r.delay, "err", err)
			_ = cm.sess.Release(c.Unit, c.Epoch)
			continue
		}
		delete(cm.retryAt, c.Unit)
		cm.owned[c.Unit] = ownedUnit{epoch: c.Epoch, rev: c.Rev, lease: c.Lease}
		cm.ownedN.Store(int64(len(cm.owned)))
		cm.takeover.Add(1)
		opened++
		b.log.Info("took ownership", "unit", c.Unit, "leader_epoch", c.Epoch)
	}
	return opened
}

// release stops the unit and deletes its owner key if it is still ours.
// Graceful (a hand-off while the lease is alive): the actor fsyncs and
// closes. Otherwise (the lease is gone, or the key is not ours): the
// files are closed without one more write, since a peer may own them.
func (b *Broker) release(unit string, graceful bool) { b.releaseUnit(unit, graceful, true) }

// releaseUnit is release; with deleteKey false the owner key is left to
// expire with the lease. It reports whether the key is known to be gone
// or left alone on purpose (false: etcd did not answer the delete).
func (b *Broker) releaseUnit(unit string, graceful, deleteKey bool) bool {
	cm := b.cluster
	o := cm.owned[unit]
	b.closeUnit(unit, graceful)
	delete(cm.owned, unit)
	cm.ownedN.Store(int64(len(cm.owned)))
	if graceful {
		cm.handoffs.Add(1)
		b.log.Info("handed off", "unit", unit, "leader_epoch", o.epoch)
	}
	if !deleteKey || (!graceful && cm.sess.Lease() != o.lease) {
		return deleteKey // the unit's lease, and every key under it, is gone already
	}
	// Deleting the key only if it is still ours at this epoch, so a key
	// that is not ours any more is left alone.
	if err := cm.sess.Release(unit, o.epoch); err != nil {
		b.log.Warn("releasing an owner key failed; it goes with the lease", "unit", unit, "err", err)
		return false
	}
	return true
}

// openUnit recovers a partition or a coordinator slot from the shared
// volume (as a restart does) and publishes it, acting only while lease
// (the one its owner key was created under) is certainly alive.
func (b *Broker) openUnit(unit string, epoch int32, lease coord.LeaseID) error {
	// A claim can go stale before its unit is opened (the broker paused
	// between the two past its TTL, and a peer owns the unit now):
	// recovery cuts torn tails and a take-over seals or replaces files,
	// writes that would destroy what that peer appends. Asked here, and
	// again before each write of the take-over (partlog.Log.TakeOver,
	// slotlog.Adopt).
	if !b.cluster.sess.AliveUnder(lease) {
		return errClaimGone
	}
	if txn, n, ok := parseSlotUnit(unit); ok {
		if err := b.openSlotUnit(txn, n, epoch, lease); err != nil {
			return err
		}
		b.cluster.mu.Lock()
		b.cluster.epochs[unit] = epoch
		b.cluster.mu.Unlock()
		return nil
	}
	name, p, ok := ownership.ParsePartitionUnit(unit)
	if !ok {
		return fmt.Errorf("unknown unit %q", unit)
	}
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	t := b.topics.load().byName[name]
	if t == nil || p >= int32(len(t.parts)) {
		return fmt.Errorf("topic %s partition %d is not known here yet", name, p)
	}
	if t.parts[p] != nil {
		return nil
	}
	cfg := b.partitionConfig(t, p)
	cfg.LeaderEpoch = epoch // stamped into its batches and its epoch cache
	cfg.Gate = func() bool { return b.cluster.sess.AliveUnder(lease) }
	h, err := partition.Open(b.sys, cfg)
	if err != nil {
		return err
	}
	b.heapRelease.opened()
	b.cluster.mu.Lock()
	b.cluster.epochs[unit] = epoch
	b.cluster.mu.Unlock()
	b.topics.p.Store(b.topics.load().with(t.withPart(p, h)))
	return nil
}

// closeUnit unpublishes a partition's actor and retires it (graceful) or
// abandons it.
func (b *Broker) closeUnit(unit string, graceful bool) {
	if txn, n, ok := parseSlotUnit(unit); ok {
		if err := b.closeSlotUnit(txn, n); err != nil {
			b.log.Warn("closing a coordinator slot", "unit", unit, "err", err)
		}
		b.cluster.mu.Lock()
		delete(b.cluster.epochs, unit)
		b.cluster.mu.Unlock()
		return
	}
	name, p, ok := ownership.ParsePartitionUnit(unit)
	if !ok {
		return
	}
	b.topicsMu.Lock()
	t := b.topics.load().byName[name]
	var h *partition.Handle
	if t != nil && p < int32(len(t.parts)) {
		h = t.parts[p]
		b.topics.p.Store(b.topics.load().with(t.withPart(p, nil)))
	}
	b.topicsMu.Unlock()
	b.cluster.mu.Lock()
	delete(b.cluster.epochs, unit)
	b.cluster.mu.Unlock()
	switch {
	case h == nil:
	case graceful:
		h.Retire() // closed and fsynced; late requests are told to re-route
	default:
		h.Abandon()
	}
}

// withPart returns a copy of the topic with partition p's handle set.
func (t *topic) withPart(p int32, h *partition.Handle) *topic {
	parts := append([]*partition.Handle(nil), t.parts...)
	parts[p] = h
	return &topic{meta: t.meta, resolved: t.resolved, parts: parts}
}

// applyTopicView brings the local topic registry in line with etcd:
// topics created, grown, altered or deleted by any broker.
func (b *Broker) applyTopicView(v *coord.View) {
	b.topicsMu.Lock()
	defer b.topicsMu.Unlock()
	set := b.topics.load()
	for name, meta := range v.Topics {
		cur := set.byName[name]
		switch {
		case cur == nil || cur.meta.ID != meta.ID:
			if cur != nil {
				set = set.without(name)
				b.stopTopicParts(cur, false)
			}
			set = set.with(&topic{meta: meta, resolved: topics.Resolve(meta.Configs, b.topicDefaults()), parts: make([]*partition.Handle, meta.Partitions)})
		case meta.Partitions > int32(len(cur.parts)) || !sameConfigs(cur.meta.Configs, meta.Configs):
			grown := &topic{meta: meta, resolved: topics.Resolve(meta.Configs, b.topicDefaults()), parts: append([]*partition.Handle(nil), cur.parts...)}
			for int32(len(grown.parts)) < meta.Partitions {
				grown.parts = append(grown.parts, nil)
			}
			if !sameConfigs(cur.meta.Configs, meta.Configs) {
				for _, h := range grown.parts {
					if h != nil {
						h.Send(updateConfigMessage(grown.resolved))
					}
				}
			}
			set = set.with(grown)
		}
	}
	for name, cur := range set.byName {
		if _, ok := v.Topics[name]; !ok {
			set = set.without(name)
			// The owner of each partition removes its directory.
			b.stopTopicParts(cur, true)
			b.forgetTopicOffsets(name, int32(len(cur.parts)))
		}
	}
	b.topics.p.Store(set)
}

func (b *Broker) stopTopicParts(t *topic, remove bool) {
	for p, h := range t.parts {
		if h == nil {
			continue
		}
		h.Stop(remove)
		b.cluster.mu.Lock()
		delete(b.cluster.epochs, ownership.PartitionUnit(t.meta.Name, int32(p)))
		b.cluster.mu.Unlock()
	}
}

func sameConfigs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// partitionOwner is who leads a partition and at which epoch, from the
// cluster view; in single-broker mode, this broker at epoch 0.
func (b *Broker) partitionOwner(topic string, p int32) (leader, epoch int32, ok bool) {
	if b.cluster == nil {
		return b.cfg.BrokerID, 0, true
	}
	if b.cluster.watch.Load() == nil {
		return -1, -1, false // still starting
	}
	unit, internal := internalSlotUnit(topic, p) // led by the slot's owner
	if !internal {
		unit = ownership.PartitionUnit(topic, p)
	}
	o, ok := b.cluster.watch.Load().View().Owners[unit]
	if !ok {
		return -1, -1, false
	}
	return o.Broker, o.Epoch, true
}

// liveBrokers lists the brokers to answer Metadata and DescribeCluster
// with, by id: this broker's address for the client's listener alone, or
// in a cluster every live member at the address it registered for that
// listener (as Apache's brokers register every listener's endpoint).
func (b *Broker) liveBrokers(listener string) []coord.Member {
	if b.cluster == nil || b.cluster.watch.Load() == nil {
		host, port := b.advertised(listener)
		return []coord.Member{{ID: b.cfg.BrokerID, Host: host, Port: port}}
	}
	v := b.cluster.watch.Load().View()
	out := make([]coord.Member, 0, len(v.Members))
	for _, m := range v.Members {
		if listener != "" {
			m.Host, m.Port = m.On(listener)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// controllerID is what Metadata and DescribeCluster name as controller:
// the lowest live broker id (kaas has no controller; etcd decides).
func (b *Broker) controllerID() int32 {
	ms := b.liveBrokers("")
	if len(ms) == 0 {
		return -1
	}
	return ms[0].ID
}

// partitionGate is the partition actors' Gate: nil (always open) for a
// single broker; in a cluster closed until openUnit gives the partition
// the gate of the lease it was claimed under.
func (b *Broker) partitionGate() func() bool {
	if b.cluster == nil {
		return nil
	}
	return func() bool { return false }
}

// leaseAlive reports whether this broker holds a lease that is certainly
// alive (a cheap early refusal: each unit's own gate decides).
func (b *Broker) leaseAlive() bool { return b.cluster == nil || b.cluster.sess.Alive() }

// Kinds of coordinator slot (clusterMode.slotLease's first index).
const (
	txnSlots     = 0
	offsetsSlots = 1
)

// slotAlive reports whether coordinator slot n of kind may write and
// acknowledge now: always for a single broker; in a cluster only while
// the lease the slot was claimed under is certainly alive.
func (b *Broker) slotAlive(kind, n int) bool {
	if b.cluster == nil {
		return true
	}
	lease := coord.LeaseID(b.cluster.slotLease[kind][n].Load())
	return lease != 0 && b.cluster.sess.AliveUnder(lease)
}

func sortedUnits[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// leaderEpochCode is Apache's check of a request's CurrentLeaderEpoch
// (Fetch v9+, ListOffsets v4+) against the epoch this broker leads the
// partition at: none given (-1) passes; an older one is
// FENCED_LEADER_EPOCH (the client's metadata is stale), a newer one
// UNKNOWN_LEADER_EPOCH (this broker is behind). Both make the client
// refresh its metadata and retry. A single broker leads at epoch 0.
func (b *Broker) leaderEpochCode(topic string, p int32, current int32) int16 {
	if current < 0 {
		return 0
	}
	var epoch int32
	if b.cluster != nil {
		b.cluster.mu.Lock()
		e, ok := b.cluster.epochs[ownership.PartitionUnit(topic, p)]
		b.cluster.mu.Unlock()
		if !ok {
			return kerr.NotLeaderForPartition.Code
		}
		epoch = e
	}
	switch {
	case current < epoch:
		return kerr.FencedLeaderEpoch.Code
	case current > epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
