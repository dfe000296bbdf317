package broker

// The group coordinator: a pool of group actors (one per group, hashed
// onto the 50 coordinator slots like __consumer_offsets partitions, each
// checking its offsets' retention on its own timer), the offsets writer
// behind them, start-up loading, and the transaction seam
// (completeTxnOffsets). The per-API handlers are
// NN_name.go as usual.

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/group"
	"kaas/actors/offsetwriter"
	"kaas/actors/system"
	"kaas/messages"
	"kaas/metrics"
	"kaas/model"
	"kaas/model/slots"
	"kaas/state/consumergroup"
	"kaas/state/ownership"
	"kaas/storage/offsetlog"
)

// groupCoordinator is the broker's group state outside the actors: the
// pool of group actors (closed once the broker unloads the groups: no new
// groups, no retirements) and the offsets writer behind them.
type groupCoordinator struct {
	offsets *offsetwriter.Handle
	pool    *system.Pool[*group.Handle]
	co      *coordinators // which slots are served here
}

// What became of a message for a group.
const (
	routed      = system.Routed   // the group actor has it
	groupAbsent = system.Absent   // no such group (and none created)
	groupDying  = system.Retiring // the group is Dead and going away
)

// OffsetsDir is where the slot logs live under the data directory.
func OffsetsDir(dataDir string) string { return filepath.Join(dataDir, "__cluster", "offsets") }

func (b *Broker) groupConfig() consumergroup.Config {
	return consumergroup.Config{
		MinSessionTimeout:     b.cfg.GroupMinSessionTimeout,
		MaxSessionTimeout:     b.cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: b.cfg.GroupInitialRebalanceDelay,
		MaxSize:               b.cfg.GroupMaxSize,
		MaxMetadataSize:       b.cfg.OffsetMetadataMaxBytes,
		OffsetsRetention:      b.cfg.OffsetsRetention,

		ConsumerHeartbeatInterval: b.cfg.ConsumerHeartbeatInterval,
		ConsumerSessionTimeout:    b.cfg.ConsumerSessionTimeout,
		ConsumerAssignors:         b.cfg.ConsumerAssignors,
		ConsumerMaxSize:           b.cfg.ConsumerMaxSize,
		MigrationPolicy:           consumergroup.MigrationPolicy(b.cfg.ConsumerMigrationPolicy),
	}.Normalized()
}

// startGroups spawns the offsets writer: with all (a single broker) over
// every slot log, recovered, and one actor per recovered group; in a
// cluster with no slot open (openOffsetsSlot opens each one claimed),
// and every write gated by the lease.
func (b *Broker) startGroups(co *coordinators, all bool) (*groupCoordinator, error) {
	gc := &groupCoordinator{pool: system.NewPool[*group.Handle](b.sys), co: co}
	dir := OffsetsDir(b.cfg.DataDir)
	if !all {
		h, err := offsetwriter.OpenNone(b.sys, b.env, dir, offsetlog.Options{}, offsetsObserver{b.metrics}, func(n int) bool { return b.slotAlive(offsetsSlots, n) }, b.cfg.FlushInterval)
		if err != nil {
			return nil, fmt.Errorf("opening consumer offsets: %w", err)
		}
		gc.offsets = h
		return gc, nil
	}
	var alive func(int) bool
	if h := b.cfg.testHooks; h != nil && h.leaseInDoubt != nil {
		// A single broker has no lease; its tests may still put one in
		// doubt (slotAlive).
		alive = func(n int) bool { return b.slotAlive(offsetsSlots, n) }
	}
	h, loaded, err := offsetwriter.Open(b.sys, b.env, dir, offsetlog.Options{}, offsetsObserver{b.metrics}, alive, b.cfg.FlushInterval)
	if err != nil {
		return nil, fmt.Errorf("opening consumer offsets: %w", err)
	}
	gc.offsets = h
	if err := b.loadGroups(gc, loaded); err != nil {
		gc.stop()
		return nil, err
	}
	return gc, nil
}

// loadGroups starts an actor for every group recovered from a slot log.
func (b *Broker) loadGroups(gc *groupCoordinator, loaded []offsetwriter.Loaded) error {
	for _, l := range loaded {
		if l.Slot != slots.Of(l.Group) {
			b.log.Warn("group found in another slot's offsets log; loading it anyway", "group", l.Group, "log_slot", l.Slot, "slot", slots.Of(l.Group))
		}
		if _, err := gc.pool.Start(l.Group, b.groupSpawner(gc, l.Group, l.State)); err != nil {
			return err
		}
	}
	if len(loaded) > 0 {
		b.log.Info("loaded consumer groups", "groups", len(loaded))
	}
	return nil
}

// groupSpawner starts a group's actor (from loaded state, or empty) with
// its offsets retention check every offsets.retention.check.interval.ms
// (Apache's scheduled cleanup).
func (b *Broker) groupSpawner(gc *groupCoordinator, id string, loaded *offsetlog.GroupState) system.Spawner[*group.Handle] {
	return func() (*group.Handle, bool, error) {
		if !gc.co.groupOwned[slots.Of(id)].Load() && loaded == nil {
			return nil, false, nil // handed off (a slot being loaded starts its groups itself)
		}
		h, err := group.Spawn(b.sys, group.Config{
			ID: id, Slot: slots.Of(id), Groups: b.groupConfig(), Offsets: gc.offsets,
			Loaded: loaded, Observer: groupObserver{b.metrics}, Logger: b.log,
			Retire: func(h *group.Handle) { gc.pool.Retire(h.ID, h) },
			Topics: b.topicsImage, ConsumerTimeouts: b.consumerTimeoutsFor,
		})
		if err != nil {
			return nil, false, err
		}
		every := b.cfg.OffsetsRetentionCheckInterval
		if every <= 0 {
			every = 10 * time.Minute
		}
		b.sys.Every(h.PID(), every, messages.ExpireOffsets{})
		return h, true, nil
	}
}

// sendToGroup delivers msg to the group's actor, creating the group first
// if create is set and it does not exist (never once the groups are
// unloaded). A group that is going away answers groupDying.
func (b *Broker) sendToGroup(id string, create bool, msg any) system.Route {
	gc := b.groups()
	if gc == nil || !gc.co.groupOwned[slots.Of(id)].Load() {
		return groupAbsent
	}
	var spawn system.Spawner[*group.Handle]
	if create {
		spawn = b.groupSpawner(gc, id, nil)
	}
	route, err := gc.pool.Send(id, spawn, false, msg)
	if err != nil {
		b.log.Error("cannot start a group actor", "group", id, "err", err)
		return groupDying
	}
	return route
}

// groups is the open group coordinator, or nil (coordinators.go).
func (b *Broker) groups() *groupCoordinator {
	if co := b.coordinating(); co != nil {
		return co.groups
	}
	return nil
}

// liveGroups lists the groups not going away, by id.
func (b *Broker) liveGroups() []*group.Handle {
	if gc := b.groups(); gc != nil {
		return gc.pool.Live()
	}
	return nil
}

// groupStatus is Apache's validateGroupStatus: INVALID_GROUP_ID for an
// empty group id where the API needs one, then groupSlotStatus.
func (b *Broker) groupStatus(id string, allowEmptyID bool) int16 {
	if id == "" && !allowEmptyID {
		return kerr.InvalidGroupID.Code
	}
	return b.groupSlotStatus(id)
}

// groupSlotStatus is COORDINATOR_NOT_AVAILABLE once the broker is
// stopping (Apache's !isActive); on a cluster broker, NOT_COORDINATOR
// for a group whose offsets slot another broker owns, and
// COORDINATOR_LOAD_IN_PROGRESS while this broker loads it.
func (b *Broker) groupSlotStatus(id string) int16 {
	if code := b.coordinatorStatus(); code != 0 {
		return code
	}
	return b.slotStatus(ownership.OffsetsSlotUnit(slots.Of(id)), b.coordinating().groupOwned[slots.Of(id)].Load())
}

// coordinatorStatus is COORDINATOR_NOT_AVAILABLE once the broker is
// stopping (Apache's !isActive), else 0.
func (b *Broker) coordinatorStatus() int16 {
	if gc := b.groups(); gc == nil || gc.pool.Closed() {
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// forgetTopicOffsets drops every group's offsets for a deleted topic
// (Apache's handleDeletedPartitions), with tombstones in the slot logs.
func (b *Broker) forgetTopicOffsets(topic string, partitions int32) {
	tps := make([]model.TopicPartition, 0, partitions)
	for p := int32(0); p < partitions; p++ {
		tps = append(tps, model.TopicPartition{Topic: topic, Partition: p})
	}
	for _, h := range b.liveGroups() {
		b.sendToGroup(h.ID, false, &messages.RemovePartitions{Partitions: tps})
	}
}

// notifyTopicsChanged tells every group that topics were created (or
// deleted or grown), so consumer groups recompute their subscriptions on
// their next heartbeat (Apache's onNewMetadataImage).
func (b *Broker) notifyTopicsChanged(created bool) {
	b.topicsVersion.Add(1)
	for _, h := range b.liveGroups() {
		b.sendToGroup(h.ID, false, messages.TopicsChanged{Created: created})
	}
}

// unload answers every parked JoinGroup/SyncGroup and stops taking group
// requests, so stopping the server (or handing the coordinator off) does
// not wait for rebalances.
func (gc *groupCoordinator) unload() {
	p := gc.pool
	if p.Closed() {
		return
	}
	p.Close()
	unloadAll(p.Live())
}

// unloadGroups is unload for the open group coordinator, if any.
func (b *Broker) unloadGroups() {
	if gc := b.groups(); gc != nil {
		gc.unload()
	}
}

// stop stops every group actor, then the offsets writer (which fsyncs and
// closes the logs). Called after the transaction coordinator has stopped,
// so no marker is still on its way to it.
func (gc *groupCoordinator) stop() error {
	gc.pool.Stop()
	if gc.offsets != nil {
		return gc.offsets.Stop()
	}
	return nil
}

// groupObserver feeds group actor measurements into the metrics.
type groupObserver struct{ m *metrics.Metrics }

func (o groupObserver) StateChanged(from, to group.Kind) {
	if from != (group.Kind{}) {
		o.m.Groups.WithLabelValues(from.Type, from.State).Dec()
	}
	if to != (group.Kind{}) {
		o.m.Groups.WithLabelValues(to.Type, to.State).Inc()
	}
}

func (o groupObserver) RebalanceStarted()      { o.m.Rebalances.Inc() }
func (o groupObserver) OffsetsCommitted(n int) { o.m.OffsetCommits.Add(float64(n)) }

// offsetsObserver feeds offsets writer measurements into the metrics.
type offsetsObserver struct{ m *metrics.Metrics }

func (o offsetsObserver) Synced(d time.Duration, appends int) {
	o.m.OffsetsFsyncDuration.Observe(d.Seconds())
	o.m.OffsetsGroupCommitSizes.Observe(float64(appends))
}

// clientHost is the client's address as Apache shows it in DescribeGroups
// (InetAddress.toString: "/127.0.0.1").
func clientHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return "/" + host
}
