package broker

// The broker's side of the ownership loop (broker/cluster.Units): opening
// and closing a partition or a coordinator slot this broker claimed, and
// applying the cluster view's topics to the local registry.

import (
	"errors"
	"fmt"

	"kaas/actors/partition"
	"kaas/coord"
	"kaas/state/ownership"
	"kaas/state/topics"
)

// clusterUnits is the broker as the ownership loop sees it.
type clusterUnits struct{ b *Broker }

// errClaimGone: the lease a unit was claimed under is not certainly alive
// any more; nothing of the unit is opened.
var errClaimGone = errors.New("the lease this unit was claimed under is gone; not opened")

// OpenUnit recovers a partition or a coordinator slot from the shared
// volume (as a restart does) and publishes it, acting only while lease
// (the one its owner key was created under) is certainly alive.
func (u clusterUnits) OpenUnit(unit string, epoch int32, lease coord.LeaseID) error {
	b := u.b
	// A claim can go stale before its unit is opened (the broker paused
	// between the two past its TTL, and a peer owns the unit now):
	// recovery cuts torn tails and a take-over seals or replaces files,
	// writes that would destroy what that peer appends. Asked here, and
	// again before each write of the take-over (partlog.Log.TakeOver,
	// slotlog.Adopt).
	sess := b.cluster.Session()
	if !sess.AliveUnder(lease) {
		return errClaimGone
	}
	if txn, n, ok := parseSlotUnit(unit); ok {
		return b.openSlotUnit(txn, n, epoch, lease)
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
	cfg.Gate = func() bool { return sess.AliveUnder(lease) }
	h, err := partition.Open(b.sys, cfg)
	if err != nil {
		return err
	}
	b.openShareState(t, p, cfg.Dir, epoch, cfg.Gate)
	b.heapRelease.opened()
	b.topics.p.Store(b.topics.load().with(t.withPart(p, h)))
	return nil
}

// CloseUnit unpublishes a partition's actor and retires it (graceful) or
// abandons it; a coordinator slot is handed back (closeSlotUnit).
func (u clusterUnits) CloseUnit(unit string, graceful bool) {
	b := u.b
	if txn, n, ok := parseSlotUnit(unit); ok {
		if err := b.closeSlotUnit(txn, n); err != nil {
			b.log.Warn("closing a coordinator slot", "unit", unit, "err", err)
		}
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
	if h != nil {
		b.closeShareState(t, p)
	}
	switch {
	case h == nil:
	case graceful:
		h.Retire() // closed and fsynced; late requests are told to re-route
	default:
		h.Abandon()
	}
}

// ApplyView applies the topics of every view, and its entity configs
// (quotas, client metrics) when they changed.
func (u clusterUnits) ApplyView(old, cur *coord.View) {
	u.b.applyTopicView(cur)
	if old == nil || old.EntitiesRev != cur.EntitiesRev {
		u.b.applyEntityViews(cur)
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
		b.closeShareState(t, int32(p))
		h.Stop(remove)
		b.cluster.Forget(ownership.PartitionUnit(t.meta.Name, int32(p)))
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
