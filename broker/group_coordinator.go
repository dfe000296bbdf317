package broker

// The group coordinator: a registry of group actors (one per group, hashed
// onto the 50 coordinator slots like __consumer_offsets partitions), the
// offsets writer behind them, start-up loading, offsets expiry, and the
// transaction seam (completeTxnOffsets). The per-API handlers are
// NN_name.go as usual.

import (
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/group"
	"kaas/actors/offsetwriter"
	"kaas/messages"
	"kaas/metrics"
	"kaas/state/consumergroup"
	"kaas/storage/offsetlog"
	"kaas/storage/slots"
)

// groupCoordinator is the broker's group state outside the actors.
type groupCoordinator struct {
	offsets *offsetwriter.Handle

	mu       sync.Mutex
	byID     map[string]*groupEntry
	unloaded bool // the broker is stopping: no new groups, no requests
	stopped  bool

	stopExpiry chan struct{}
	expiryDone chan struct{}
}

type groupEntry struct {
	h *group.Handle
	// retired is closed once a Dead group's actor has stopped; non-nil
	// from the moment it is retiring.
	retired chan struct{}
}

// groupRoute says what became of a message for a group.
type groupRoute int

const (
	routed      groupRoute = iota // the group actor has it
	groupAbsent                   // no such group (and none created)
	groupDying                    // the group is Dead and going away
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
	}.Normalized()
}

// startGroups recovers the offsets logs, spawns the writer and one actor
// per recovered group, and starts the offsets expiry timer.
func (b *Broker) startGroups() error {
	gc := &b.groupCoord
	gc.byID = map[string]*groupEntry{}
	h, loaded, err := offsetwriter.Open(b.sys, OffsetsDir(b.cfg.DataDir), offsetlog.Options{}, offsetsObserver{b.metrics}, b.log)
	if err != nil {
		return fmt.Errorf("opening consumer offsets: %w", err)
	}
	gc.offsets = h
	for _, l := range loaded {
		if l.Slot != slots.Of(l.Group) {
			b.log.Warn("group found in another slot's offsets log; loading it anyway", "group", l.Group, "log_slot", l.Slot, "slot", slots.Of(l.Group))
		}
		gh, err := b.spawnGroup(l.Group, l.State)
		if err != nil {
			return err
		}
		gc.byID[l.Group] = &groupEntry{h: gh}
	}
	if len(loaded) > 0 {
		b.log.Info("loaded consumer groups", "groups", len(loaded))
	}
	gc.stopExpiry, gc.expiryDone = make(chan struct{}), make(chan struct{})
	go b.expireOffsetsLoop()
	return nil
}

func (b *Broker) spawnGroup(id string, loaded *offsetlog.GroupState) (*group.Handle, error) {
	return group.Spawn(b.sys, group.Config{
		ID: id, Slot: slots.Of(id), Groups: b.groupConfig(), Offsets: b.groupCoord.offsets,
		Loaded: loaded, Observer: groupObserver{b.metrics}, Logger: b.log, Retire: b.retireGroup,
	})
}

// sendToGroup delivers msg to the group's actor, creating the group first
// if create is set and it does not exist. The send happens under the
// registry lock, so it can never land behind a retiring actor's final
// message.
func (b *Broker) sendToGroup(id string, create bool, msg any) groupRoute {
	gc := &b.groupCoord
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if e := gc.byID[id]; e != nil {
		if e.retired != nil {
			return groupDying
		}
		e.h.Send(msg)
		return routed
	}
	if !create || gc.unloaded {
		return groupAbsent
	}
	h, err := b.spawnGroup(id, nil)
	if err != nil {
		b.log.Error("cannot start a group actor", "group", id, "err", err)
		return groupDying
	}
	gc.byID[id] = &groupEntry{h: h}
	h.Send(msg)
	return routed
}

// retireGroup unregisters a Dead group and stops its actor (Apache removes
// it from the group cache). Called from the actor, so the stop runs on its
// own goroutine.
func (b *Broker) retireGroup(h *group.Handle) {
	gc := &b.groupCoord
	gc.mu.Lock()
	e := gc.byID[h.ID]
	if e == nil || e.h != h || e.retired != nil || gc.unloaded {
		gc.mu.Unlock()
		return
	}
	e.retired = make(chan struct{})
	gc.mu.Unlock()
	go func() {
		h.Stop()
		gc.mu.Lock()
		if gc.byID[h.ID] == e {
			delete(gc.byID, h.ID)
		}
		gc.mu.Unlock()
		close(e.retired)
	}()
}

// liveGroups lists the registered, non-retiring groups.
func (b *Broker) liveGroups() []*group.Handle {
	gc := &b.groupCoord
	gc.mu.Lock()
	defer gc.mu.Unlock()
	out := make([]*group.Handle, 0, len(gc.byID))
	for _, e := range gc.byID {
		if e.retired == nil {
			out = append(out, e.h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// groupStatus is Apache's validateGroupStatus: INVALID_GROUP_ID for an
// empty group id where the API needs one, COORDINATOR_NOT_AVAILABLE while
// the broker stops. This broker owns every slot, so NOT_COORDINATOR and
// COORDINATOR_LOAD_IN_PROGRESS never arise (start-up loads before
// listening).
func (b *Broker) groupStatus(id string, allowEmptyID bool) int16 {
	if id == "" && !allowEmptyID {
		return kerr.InvalidGroupID.Code
	}
	return b.coordinatorStatus()
}

// coordinatorStatus is COORDINATOR_NOT_AVAILABLE once the broker is
// stopping (Apache's !isActive), else 0.
func (b *Broker) coordinatorStatus() int16 {
	gc := &b.groupCoord
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.unloaded {
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// expireOffsetsLoop runs offsets retention on every group each
// offsets.retention.check.interval.ms (Apache's scheduled cleanup).
func (b *Broker) expireOffsetsLoop() {
	gc := &b.groupCoord
	defer close(gc.expiryDone)
	every := b.cfg.OffsetsRetentionCheckInterval
	if every <= 0 {
		every = 10 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-gc.stopExpiry:
			return
		case <-t.C:
			for _, h := range b.liveGroups() {
				b.sendToGroup(h.ID, false, messages.ExpireOffsets{})
			}
		}
	}
}

// forgetTopicOffsets drops every group's offsets for a deleted topic
// (Apache's handleDeletedPartitions), with tombstones in the slot logs.
func (b *Broker) forgetTopicOffsets(topic string, partitions int32) {
	tps := make([]consumergroup.TP, 0, partitions)
	for p := int32(0); p < partitions; p++ {
		tps = append(tps, consumergroup.TP{Topic: topic, Partition: p})
	}
	for _, h := range b.liveGroups() {
		b.sendToGroup(h.ID, false, &messages.RemovePartitions{Partitions: tps})
	}
}

// unloadGroups answers every parked JoinGroup/SyncGroup and stops taking
// group requests, so stopping the server does not wait for rebalances.
func (b *Broker) unloadGroups() {
	gc := &b.groupCoord
	gc.mu.Lock()
	if gc.byID == nil || gc.unloaded {
		gc.mu.Unlock()
		return
	}
	gc.unloaded = true
	var wg sync.WaitGroup
	for _, e := range gc.byID {
		if e.retired != nil {
			continue
		}
		wg.Add(1)
		e.h.Send(&messages.UnloadGroup{Done: wg.Done})
	}
	gc.mu.Unlock()
	wg.Wait()
}

// stopGroups stops every group actor, then the offsets writer (which
// fsyncs and closes the logs).
func (b *Broker) stopGroups() {
	gc := &b.groupCoord
	if gc.stopExpiry != nil {
		close(gc.stopExpiry)
		<-gc.expiryDone
		gc.stopExpiry = nil
	}
	gc.mu.Lock()
	if gc.stopped {
		gc.mu.Unlock()
		return
	}
	gc.unloaded, gc.stopped = true, true
	entries := make([]*groupEntry, 0, len(gc.byID))
	for _, e := range gc.byID {
		entries = append(entries, e)
	}
	gc.mu.Unlock()
	for _, e := range entries {
		if e.retired != nil {
			<-e.retired
			continue
		}
		e.h.Stop()
	}
	if gc.offsets != nil {
		// Stopped after the transaction coordinator (stopActors), so no
		// marker is still on its way to it.
		gc.offsets.Stop()
	}
}

// groupObserver feeds group actor measurements into the metrics.
type groupObserver struct{ m *metrics.Metrics }

func (o groupObserver) StateChanged(from, to string) {
	if from != "" {
		o.m.Groups.WithLabelValues(from).Dec()
	}
	if to != "" {
		o.m.Groups.WithLabelValues(to).Inc()
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
