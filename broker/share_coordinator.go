package broker

// The share coordinator (KIP-932): one actor (actors/share) owns every
// share group of this broker — members, share sessions and the
// share-partitions' acquisition state. In a cluster it serves two halves
// independently, as Apache splits them: the membership of the groups
// whose offsets slot is owned here (ShareGroupHeartbeat and
// ShareGroupDescribe, NOT_COORDINATOR elsewhere) and the share-partitions
// of the partitions owned here (ShareFetch and ShareAcknowledge,
// NOT_LEADER_OR_FOLLOWER elsewhere), each partition's state in a log of
// its own kept with the partition (openShareState).
//
// Every share-partition's state is persisted in the share state log
// (storage/sharestate) and an acknowledgement is answered only once it is
// fsynced; a restart loads the share-partitions back (members rejoin, and
// records that were acquired are available again at once, their delivery
// counts kept).

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/share"
	"kaas/broker/auth"
	"kaas/metrics"
	"kaas/model"
	"kaas/state/acl"
	"kaas/state/sharegroup"
	"kaas/state/sharepartition"
	"kaas/storage/partlog"
	"kaas/storage/sharestate"
	"kaas/storage/slotlog"
	"kaas/storage/topicstore"
)

func (b *Broker) shareConfig() sharegroup.Config {
	c := b.cfg
	return sharegroup.Config{
		HeartbeatInterval: c.ShareHeartbeatInterval,
		SessionTimeout:    c.ShareSessionTimeout,
		MaxSize:           c.ShareMaxSize,
		MaxSessions:       c.ShareMaxSessions,
		AutoOffsetReset:   c.ShareAutoOffsetReset,
		ReadCommitted:     c.ShareIsolationLevel == "read_committed",
		Partition: sharepartition.Config{
			LockDuration:   c.ShareRecordLockDuration,
			DeliveryLimit:  int16(min(c.ShareDeliveryCountLimit, 1<<15-1)),
			MaxRecordLocks: c.SharePartitionMaxRecordLocks,
		},
	}
}

// startShares spawns the share coordinator. A single broker opens its
// one share state log; a cluster broker has none: each partition's comes
// with the partition (openShareState).
func (b *Broker) startShares() error {
	var store *sharestate.Store
	var loaded map[sharestate.Key]sharestate.Record
	if b.cluster == nil {
		var err error
		if store, loaded, err = sharestate.Open(b.env, sharestate.Dir(b.cfg.DataDir)); err != nil {
			return fmt.Errorf("opening share state: %w", err)
		}
	}
	b.groupCfg.mu.Lock()
	perGroup := b.perGroupShareConfigs()
	b.groupCfg.mu.Unlock()
	h, err := share.Spawn(b.sys, share.Config{
		Groups:        b.shareConfig(),
		PerGroup:      perGroup,
		Topics:        shareTopics{b},
		Resolve:       b.resolveSharePartition,
		Store:         store,
		Loaded:        loaded,
		Logger:        b.log,
		Synced:        func(d time.Duration, _ int) { b.metrics.ShareStateFsyncDuration.Observe(d.Seconds()) },
		FlushInterval: b.cfg.FlushInterval,
	})
	if err != nil {
		if store != nil {
			_ = store.Close()
		}
		return err
	}
	b.shares = h
	b.metrics.RegisterShares(func() []metrics.SharePartition {
		var out []metrics.SharePartition
		for _, p := range h.Stats() {
			out = append(out, metrics.SharePartition(p))
		}
		return out
	})
	return nil
}

func (b *Broker) stopShares() {
	if b.shares != nil {
		b.shares.Stop()
	}
}

// shareTopics is the topics image as share groups subscribe to it (no
// internal topics: Apache refuses share groups on them).
type shareTopics struct{ b *Broker }

func (t shareTopics) ByName(name string) (sharegroup.TopicID, int32, bool) {
	tp := t.b.topics.load().byName[name]
	if tp == nil {
		return sharegroup.TopicID{}, 0, false
	}
	return tp.meta.ID, int32(len(tp.parts)), true
}

// resolveSharePartition finds a partition led here for the share
// coordinator.
func (b *Broker) resolveSharePartition(tp model.TopicIDPartition) (share.Partition, int16) {
	t := b.topics.load().byID[topicstore.UUID(tp.Topic)]
	switch {
	case t == nil:
		return share.Partition{}, kerr.UnknownTopicID.Code
	case tp.Partition < 0 || int(tp.Partition) >= len(t.parts):
		return share.Partition{}, kerr.UnknownTopicOrPartition.Code
	case t.parts[tp.Partition] == nil:
		return share.Partition{}, kerr.NotLeaderForPartition.Code
	}
	h := t.parts[tp.Partition]
	return share.Partition{Topic: t.meta.Name, View: func() *partlog.View { return h.View() }}, 0
}

// shareCanRead is READ on a topic for the share coordinator.
func shareCanRead(a auth.Access) func(string) bool {
	if !a.On() {
		return func(string) bool { return true }
	}
	return func(topic string) bool { return a.Topic(acl.Read, topic) }
}

// isShareGroup says whether id names a share group (a classic or consumer
// group may not take its id, as in Apache).
func (b *Broker) isShareGroup(id string) bool {
	if b.shares == nil {
		return false
	}
	for _, l := range b.shares.Groups() {
		if l.ID == id && b.groupSlotStatus(id) == 0 {
			return true
		}
	}
	return false
}

// openShareState hands the share coordinator a partition this cluster
// broker took over at epoch, before the partition is published: its
// share state log is sealed against the previous owner and loaded if it
// has one, else made at the first share fetch. Both write only while gate
// (the partition's lease) holds. A log that fails to open leaves the
// partition served, its share-partitions KAFKA_STORAGE_ERROR until the
// next try.
func (b *Broker) openShareState(t *topic, p int32, dir string, epoch int32, gate func() bool) {
	if b.shares == nil {
		return
	}
	owner := slotlog.Owner{Gen: int64(epoch) + 1, MayAct: gate}
	open := func() (*sharestate.Store, map[sharestate.Key]sharestate.Record, error) {
		return sharestate.OpenPartition(b.env, dir, owner)
	}
	var store *sharestate.Store
	var loaded map[sharestate.Key]sharestate.Record
	has, err := sharestate.HasPartition(b.env.FS, dir)
	if err == nil && has {
		store, loaded, err = open()
	}
	if err != nil {
		b.log.Error("opening a partition's share state failed; trying again at its next share fetch", "topic", t.meta.Name, "partition", p, "err", err)
	}
	b.shares.OpenPartition(model.TopicIDPartition{Topic: t.meta.ID, Partition: p}, store, loaded, open, gate)
}

// closeShareState takes a partition's share state back from the share
// coordinator once the partition is no longer published here.
func (b *Broker) closeShareState(t *topic, p int32) {
	if b.shares != nil && b.cluster != nil {
		b.shares.ClosePartition(model.TopicIDPartition{Topic: t.meta.ID, Partition: p})
	}
}
