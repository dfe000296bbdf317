// Package cluster is a cluster broker's ownership loop: it follows the
// cluster view in etcd (coord) and makes the units this broker has open —
// partitions and coordinator slots — match what it should own. What to
// claim, keep, hand off or stop is decided by ownership.Decide, a pure
// function; this package reads the view and the clock, claims and deletes
// owner keys, and asks the broker (Units) to open and close units.
//
// etcd is the only source of truth for who owns what: a unit is opened
// only once its owner key was created under this broker's lease (which
// also raises its leader epoch), after the previous owner's key is gone;
// a joining broker is handed what it should own (stop, fsync, release).
package cluster

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"kaas/coord"
	"kaas/model/slots"
	"kaas/state/ownership"
)

// Units is what the loop needs of the broker it runs in.
type Units interface {
	// OpenUnit recovers unit from the shared volume (as a restart does)
	// and serves it at epoch, acting only while lease, the one its owner
	// key was created under, is certainly alive.
	OpenUnit(unit string, epoch int32, lease coord.LeaseID) error
	// CloseUnit stops serving unit: graceful (a hand-off while the lease
	// is alive) makes every accepted write durable and closes; otherwise
	// its files are closed without one more write, since a peer may own
	// them already.
	CloseUnit(unit string, graceful bool)
	// ApplyView brings the broker's topics and entity configs in line
	// with the cluster view cur; old is the view before (nil the first
	// time).
	ApplyView(old, cur *coord.View)
}

// Loop is one broker's ownership loop. owned and retryAt are touched only
// by the loop's goroutine (and Stop once it has ended).
type Loop struct {
	sess  *coord.Session
	self  int32
	units Units
	log   *slog.Logger

	// watch is set once the broker serves (Start); View reads it from the
	// start.
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
	// reconcile, tens of times a second.
	retryAt  map[string]openRetry
	handoffs atomic.Int64 // units released to a peer
	takeover atomic.Int64 // units claimed
	// settled: the last reconcile left nothing this broker should own
	// unclaimed or unopened (readiness).
	settled atomic.Bool

	mu      sync.Mutex
	epochs  map[string]int32 // unit → leader epoch, for units open here
	started bool
}

type ownedUnit struct {
	epoch int32
	rev   int64         // etcd revision of the claim
	lease coord.LeaseID // the lease the owner key was created under
}

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

// New is the ownership loop of broker self over session sess; Start
// starts it.
func New(sess *coord.Session, self int32, units Units, log *slog.Logger) *Loop {
	return &Loop{
		sess: sess, self: self, units: units, log: log,
		kick: make(chan struct{}, 1), lost: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		owned: map[string]ownedUnit{}, retryAt: map[string]openRetry{}, epochs: map[string]int32{},
	}
}

// Session is the broker's etcd session.
func (l *Loop) Session() *coord.Session { return l.sess }

// View is the current cluster view; nil until Start.
func (l *Loop) View() *coord.View {
	if w := l.watch.Load(); w != nil {
		return w.View()
	}
	return nil
}

// Start follows etcd (every view goes to Units.ApplyView, the first one
// before Start returns) and starts claiming this broker's share.
func (l *Loop) Start() error {
	w, err := l.sess.Watch(func(old, cur *coord.View) {
		l.units.ApplyView(old, cur)
		l.Kick()
	})
	if err != nil {
		return err
	}
	l.watch.Store(w)
	l.units.ApplyView(nil, w.View())
	l.sess.OnLost(func() {
		// Every unit of the lost lease is stopped before anything else
		// happens: its gate is closed already (AliveUnder), and the
		// loop releases it before a new lease is granted. Bounded, so a
		// loop stuck in a slow close cannot keep the broker out of the
		// cluster for ever.
		stopped := make(chan struct{})
		select {
		case l.lost <- stopped:
		case <-l.stop:
			return
		}
		select {
		case <-stopped:
		case <-l.stop:
		case <-time.After(l.sess.TTL()):
			l.log.Warn("units of the lost lease still stopping; joining again", "ttl", l.sess.TTL())
		}
	})
	l.started = true
	go l.run()
	return nil
}

// Stop stops the loop and hands every owned unit off.
func (l *Loop) Stop() {
	if !l.started {
		return
	}
	l.settled.Store(false)
	close(l.stop)
	<-l.done
	l.watch.Load().Stop()
	// Every unit is fsynced and closed; its owner key is deleted while
	// etcd answers. Once a delete fails (etcd gone: make cluster's Ctrl-C
	// stops etcd with the brokers) the rest are left to the lease rather
	// than each waiting out its own timeout, which kept a broker with a
	// hundred units in its shutdown for a quarter of an hour.
	keys := true
	for _, unit := range sortedUnits(l.owned) {
		keys = l.releaseUnit(unit, true, keys)
	}
}

// Kick makes the loop reconcile now rather than at its next tick.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run reconciles on every change of the cluster view and at least every
// second (a claim that lost a race is retried).
func (l *Loop) run() {
	defer close(l.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		l.reconcile()
		select {
		case <-l.stop:
			return
		case stopped := <-l.lost:
			l.reconcile() // the lease is gone: releases every unit
			close(stopped)
		case <-l.kick:
		case <-t.C:
		}
	}
}

// reconcile makes this broker's open units match ownership.Decide's plan.
func (l *Loop) reconcile() {
	v := l.View()
	lease := l.sess.Lease()
	plan := ownership.Decide(l.world(v, lease))
	// A lost lease took every owner key made under it: stop each unit
	// claimed under a lease that is not the session's now — whether no
	// lease is held or a new one has been granted since.
	for _, unit := range plan.Lost {
		l.log.Warn("the lease this unit was claimed under is gone; stopping it", "unit", unit)
		l.release(unit, false)
	}
	if lease == 0 {
		l.settled.Store(false)
		return
	}
	l.deleteLeftKeys(plan.LeftKeys)
	for _, r := range plan.Releases {
		if !r.HandOff {
			l.log.Warn("owner key no longer ours; stopping the unit", "unit", r.Unit)
		}
		l.release(r.Unit, r.HandOff)
	}
	pending := plan.Pending
	if len(plan.Claims) > 0 && l.sess.Alive() {
		pending -= l.claim(plan.Claims)
	}
	l.settled.Store(pending == 0)
}

// world is what ownership.Decide needs from the view v and the loop.
func (l *Loop) world(v *coord.View, lease coord.LeaseID) ownership.World {
	w := ownership.World{
		Self: l.self, Lease: int64(lease), Rev: v.Rev, Members: v.MemberIDs(),
		Topics: make(map[string]int32, len(v.Topics)), Slots: slots.Count,
		Reassigned: make(map[string]int32, len(v.Reassignments)),
		Keys:       make(map[string]ownership.Key, len(v.Owners)),
		Epochs:     v.Epochs,
		Held:       make(map[string]ownership.Held, len(l.owned)),
		RetryAt:    make(map[string]time.Time, len(l.retryAt)),
		Now:        time.Now(),
	}
	for name, t := range v.Topics {
		w.Topics[name] = t.Partitions
	}
	for unit, r := range v.Reassignments {
		w.Reassigned[unit] = r.Broker
	}
	for unit, o := range v.Owners {
		w.Keys[unit] = ownership.Key{Broker: o.Broker, Epoch: o.Epoch}
	}
	for unit, o := range l.owned {
		w.Held[unit] = ownership.Held{Lease: int64(o.lease), Rev: o.rev}
	}
	for unit, r := range l.retryAt {
		w.RetryAt[unit] = r.at
	}
	return w
}

// deleteLeftKeys deletes again this broker's owner keys for units it no
// longer holds: a hand-off whose delete failed (etcd unreachable just
// then: "it goes with the lease") left the key under a lease that lives
// on, and the preferred owner would wait for it as long as this broker
// runs. The delete is conditional on the key naming this broker at that
// epoch, so a claim made since by anyone is never removed. Keys under a
// lost lease vanish by themselves; only the current lease's are tried.
func (l *Loop) deleteLeftKeys(keys []ownership.LeftKey) {
	if len(keys) == 0 || !l.sess.Alive() {
		return
	}
	for _, k := range keys {
		if err := l.sess.Release(k.Unit, k.Epoch); err != nil {
			l.log.Warn("deleting an owner key left behind failed; retrying", "unit", k.Unit, "leader_epoch", k.Epoch, "err", err)
			return // etcd is not answering: the next reconcile tries again
		}
		l.log.Info("deleted an owner key left behind by a hand-off", "unit", k.Unit, "leader_epoch", k.Epoch)
	}
}

// claim takes the owner keys of units in as few etcd transactions as it
// can (a failover claims a dead broker's whole share at once) and opens
// each unit it got. It returns how many it opened; a unit it did not get
// (someone else's key, or an epoch newer than the view) is tried again on
// a later reconcile.
func (l *Loop) claim(units []ownership.Claim) int {
	priors := make([]coord.Prior, len(units))
	for i, c := range units {
		priors[i] = coord.Prior{Unit: c.Unit, Epoch: c.Epoch, Known: c.Known}
	}
	got, err := l.sess.ClaimAll(priors)
	if err != nil {
		l.log.Warn("claiming units failed; retrying", "units", len(units), "claimed", len(got), "err", err)
	}
	opened := 0
	for _, c := range got {
		if !c.OK {
			continue
		}
		// The epoch is known (Epoch) before the unit is published, so a
		// request reaching it is checked against it.
		l.mu.Lock()
		l.epochs[c.Unit] = c.Epoch
		l.mu.Unlock()
		if err := l.units.OpenUnit(c.Unit, c.Epoch, c.Lease); err != nil {
			l.Forget(c.Unit)
			r := l.retryAt[c.Unit]
			r.delay = min(max(2*r.delay, openRetryFirst), openRetryMax)
			r.at = time.Now().Add(r.delay)
			l.retryAt[c.Unit] = r
			if !l.sess.AliveUnder(c.Lease) {
				// The claim went stale before its unit opened (the
				// broker paused, or was starved, between the etcd
				// answer and the open, past its lease's deadline):
				// refusing is the safety rule working, not a fault of
				// the unit, which opens at a later claim.
				l.log.Warn("a claim went stale before its unit opened: its lease is not certainly alive; released", "unit", c.Unit, "epoch", c.Epoch, "retry_in", r.delay, "err", err)
			} else {
				l.log.Error("opening a claimed unit failed; releasing it", "unit", c.Unit, "epoch", c.Epoch, "retry_in", r.delay, "err", err)
			}
			_ = l.sess.Release(c.Unit, c.Epoch)
			continue
		}
		delete(l.retryAt, c.Unit)
		l.owned[c.Unit] = ownedUnit{epoch: c.Epoch, rev: c.Rev, lease: c.Lease}
		l.takeover.Add(1)
		opened++
		l.log.Info("took ownership", "unit", c.Unit, "leader_epoch", c.Epoch)
	}
	return opened
}

// release stops the unit and deletes its owner key if it is still ours.
func (l *Loop) release(unit string, graceful bool) { l.releaseUnit(unit, graceful, true) }

// releaseUnit is release; with deleteKey false the owner key is left to
// expire with the lease. It reports whether the key is known to be gone
// or left alone on purpose (false: etcd did not answer the delete).
func (l *Loop) releaseUnit(unit string, graceful, deleteKey bool) bool {
	o := l.owned[unit]
	l.units.CloseUnit(unit, graceful)
	l.Forget(unit)
	delete(l.owned, unit)
	if graceful {
		l.handoffs.Add(1)
		l.log.Info("handed off", "unit", unit, "leader_epoch", o.epoch)
	}
	if !deleteKey || (!graceful && l.sess.Lease() != o.lease) {
		return deleteKey // the unit's lease, and every key under it, is gone already
	}
	// Deleting the key only if it is still ours at this epoch, so a key
	// that is not ours any more is left alone.
	if err := l.sess.Release(unit, o.epoch); err != nil {
		l.log.Warn("releasing an owner key failed; it goes with the lease", "unit", unit, "err", err)
		return false
	}
	return true
}

// Epoch is the leader epoch unit is open at here (false: not open here).
func (l *Loop) Epoch(unit string) (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.epochs[unit]
	return e, ok
}

// Forget stops reporting unit as open here (its partition was stopped
// with its topic, before the loop releases it).
func (l *Loop) Forget(unit string) {
	l.mu.Lock()
	delete(l.epochs, unit)
	l.mu.Unlock()
}

// Owned maps each unit open here to its leader epoch.
func (l *Loop) Owned() map[string]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.epochs)
}

// Handoffs counts the units released to a peer; Takeovers the units
// claimed and opened.
func (l *Loop) Handoffs() int64  { return l.handoffs.Load() }
func (l *Loop) Takeovers() int64 { return l.takeover.Load() }

// Settled reports whether the last reconcile left nothing this broker
// should own unclaimed or unopened.
func (l *Loop) Settled() bool { return l.settled.Load() }

func sortedUnits[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
