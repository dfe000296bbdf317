package broker

// Per-group configs (GROUP config resources, type 32; Apache 4.2's
// GroupConfig, state/groupconfig): set with IncrementalAlterConfigs or
// AlterConfigs — before or after the group exists — described with
// DescribeConfigs, listed by ListConfigResources. They are stored as
// entity configs (group-configs.json; etcd group-configs/ in a cluster,
// applied live from the watch) and written durably before the answer.
// The share coordinator runs each share group with its own: the
// heartbeat interval and session timeout, the record lock duration,
// delivery count limit and in-flight bound of its share-partitions, where
// a new share-partition starts (share.auto.offset.reset) and its
// isolation level. A KIP-848 consumer group runs with its own
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms, read by
// its actor before each heartbeat as Apache's GroupMetadataManager does
// (consumerTimeoutsFor). streams.* are validated and stored as Apache
// does; kaas has no streams groups.
//
// Errors as Apache: an empty group name → INVALID_REQUEST; an unknown
// name, a bad value, a value outside the broker's bounds or a session
// timeout not above its heartbeat interval → INVALID_CONFIG. ACLs:
// DESCRIBE_CONFIGS / ALTER_CONFIGS on the group
// (GROUP_AUTHORIZATION_FAILED).

import (
	"fmt"
	"maps"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/coord"
	"kaas/messages"
	"kaas/state/brokerconfig"
	"kaas/state/consumergroup"
	"kaas/state/groupconfig"
	"kaas/state/sharegroup"
	"kaas/state/topics"
)

// groupConfigs is the broker's per-group config state.
type groupConfigs struct {
	store entityStore
	// mu serialises alterations, the applying of cluster views and the
	// pushes to the share coordinator (so they arrive in order).
	mu     sync.Mutex
	stored map[string]map[string]string // group → config → value
	rev    int64
	// consumer is the consumer.* configs in force for each group that
	// set any, published for the group actors (read without mu, which is
	// held across durable writes).
	consumer atomic.Pointer[map[string]consumergroup.ConsumerTimeouts]
}

func (b *Broker) openGroupConfigs() error {
	store, err := b.openEntityStore(coord.GroupConfigs)
	if err != nil {
		return err
	}
	stored, rev, err := store.Load()
	if err != nil {
		return fmt.Errorf("loading group configs: %w", err)
	}
	b.groupCfg.store, b.groupCfg.rev = store, rev
	b.setGroupConfigs(stored)
	return nil
}

// groupConfigDefaults are what a group runs with when it sets nothing:
// the broker's group.* values.
func (b *Broker) groupConfigDefaults() groupconfig.Defaults {
	c := b.cfg
	ms := func(d interface{ Milliseconds() int64 }) string { return fmt.Sprint(d.Milliseconds()) }
	broker := map[string]string{
		groupconfig.ConsumerSessionTimeout:       ms(c.ConsumerSessionTimeout),
		groupconfig.ConsumerHeartbeatInterval:    ms(c.ConsumerHeartbeatInterval),
		groupconfig.ShareSessionTimeout:          ms(c.ShareSessionTimeout),
		groupconfig.ShareHeartbeatInterval:       ms(c.ShareHeartbeatInterval),
		groupconfig.ShareRecordLockDuration:      ms(c.ShareRecordLockDuration),
		groupconfig.ShareDeliveryCountLimit:      fmt.Sprint(c.ShareDeliveryCountLimit),
		groupconfig.SharePartitionMaxRecordLocks: fmt.Sprint(c.SharePartitionMaxRecordLocks),
	}
	if c.ShareAutoOffsetReset != "" {
		broker[groupconfig.ShareAutoOffsetReset] = c.ShareAutoOffsetReset
	}
	if c.ShareIsolationLevel != "" {
		broker[groupconfig.ShareIsolationLevel] = c.ShareIsolationLevel
	}
	return groupconfig.NewDefaults(broker)
}

// shareConfigFor is a share group's configuration with its own configs.
func (b *Broker) shareConfigFor(values map[string]string) sharegroup.Config {
	eff := b.groupConfigDefaults().Effective(values)
	cfg := b.shareConfig()
	cfg.HeartbeatInterval = groupconfig.Millis(eff, groupconfig.ShareHeartbeatInterval)
	cfg.SessionTimeout = groupconfig.Millis(eff, groupconfig.ShareSessionTimeout)
	if s, by, err := groupconfig.ParseAutoOffsetReset(eff[groupconfig.ShareAutoOffsetReset]); err == nil {
		cfg.AutoOffsetReset, cfg.ResetBy = s, by
	}
	cfg.ReadCommitted = eff[groupconfig.ShareIsolationLevel] == "read_committed"
	cfg.Partition.LockDuration = groupconfig.Millis(eff, groupconfig.ShareRecordLockDuration)
	cfg.Partition.DeliveryLimit = int16(min(groupconfig.Int(eff, groupconfig.ShareDeliveryCountLimit), 1<<15-1))
	cfg.Partition.MaxRecordLocks = int(groupconfig.Int(eff, groupconfig.SharePartitionMaxRecordLocks))
	return cfg
}

// perGroupShareConfigs is every group with configs, as the share
// coordinator runs it. Under groupCfg.mu.
func (b *Broker) perGroupShareConfigs() map[string]sharegroup.Config {
	out := make(map[string]sharegroup.Config, len(b.groupCfg.stored))
	for id, values := range b.groupCfg.stored {
		out[id] = b.shareConfigFor(values)
	}
	return out
}

// setGroupConfigs publishes the stored group configs (escaped name →
// config → value) and hands them to the share coordinator. Under
// groupCfg.mu (or before the broker serves). A group whose configs no
// longer validate (another broker's bounds) is still applied: Apache
// caps such values at evaluation; its name is logged.
func (b *Broker) setGroupConfigs(stored map[string]map[string]string) {
	byName := map[string]map[string]string{}
	defaults := b.groupConfigDefaults()
	for key, configs := range stored {
		name, err := url.QueryUnescape(key)
		if err != nil {
			b.log.Warn("ignoring stored group configs with a bad group name", "name", key)
			continue
		}
		if err := defaults.Validate(configs); err != nil {
			b.log.Warn("stored group configs do not validate here", "group", name, "err", err)
		}
		byName[name] = configs
	}
	b.groupCfg.stored = byName
	consumer := make(map[string]consumergroup.ConsumerTimeouts, len(byName))
	for name, configs := range byName {
		_, session := configs[groupconfig.ConsumerSessionTimeout]
		_, interval := configs[groupconfig.ConsumerHeartbeatInterval]
		if session || interval {
			eff := defaults.Effective(configs)
			consumer[name] = consumergroup.ConsumerTimeouts{
				Session:           groupconfig.Millis(eff, groupconfig.ConsumerSessionTimeout),
				HeartbeatInterval: groupconfig.Millis(eff, groupconfig.ConsumerHeartbeatInterval),
			}
		}
	}
	b.groupCfg.consumer.Store(&consumer)
	if b.shares != nil {
		b.shares.Send(&messages.ShareGroupConfigs{PerGroup: b.perGroupShareConfigs()})
	}
}

// consumerTimeoutsFor is the session timeout and heartbeat interval a
// consumer group runs with now: its own consumer.* configs, else the
// broker's group.consumer.* values. Called from group actors.
func (b *Broker) consumerTimeoutsFor(group string) consumergroup.ConsumerTimeouts {
	if m := b.groupCfg.consumer.Load(); m != nil {
		if t, ok := (*m)[group]; ok {
			return t
		}
	}
	d := b.groupConfig()
	return consumergroup.ConsumerTimeouts{Session: d.ConsumerSessionTimeout, HeartbeatInterval: d.ConsumerHeartbeatInterval}
}

func (b *Broker) applyGroupConfigsView(v *coord.View) {
	b.groupCfg.mu.Lock()
	defer b.groupCfg.mu.Unlock()
	if b.groupCfg.store == nil || v.Rev < b.groupCfg.rev {
		return
	}
	b.groupCfg.rev = v.Rev
	b.setGroupConfigs(v.Entities[coord.GroupConfigs])
}

// groupConfigResources lists the groups with configs
// (ListConfigResources).
func (b *Broker) groupConfigResources() []string {
	b.groupCfg.mu.Lock()
	defer b.groupCfg.mu.Unlock()
	names := make([]string, 0, len(b.groupCfg.stored))
	for n := range b.groupCfg.stored {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// groupConfigEntries describes a group's configs as Apache's
// ConfigHelper.createGroupConfigEntry: every group config with its
// effective value, GROUP_CONFIG when the group set it, else
// DEFAULT_CONFIG (the broker's value); its one synonym is itself.
func (b *Broker) groupConfigEntries(name string, names []string) ([]configEntry, error) {
	if name == "" {
		return nil, &topicError{kerr.InvalidRequest.Code, "Group name must not be empty"}
	}
	b.groupCfg.mu.Lock()
	set := maps.Clone(b.groupCfg.stored[name])
	b.groupCfg.mu.Unlock()
	eff := b.groupConfigDefaults().Effective(set)
	var out []configEntry
	for _, n := range filterNames(groupconfig.Names(), names) {
		spec, _ := groupconfig.Lookup(n)
		v := eff[n]
		source := brokerconfig.Source(kmsg.ConfigSourceDefaultConfig)
		if _, ok := set[n]; ok {
			source = kmsg.ConfigSourceGroupConfig
		}
		out = append(out, configEntry{name: n, value: &v, source: source, typ: spec.Type, doc: spec.Doc,
			synonyms: []brokerconfig.Synonym{{Name: n, Value: v, Source: source}}})
	}
	return out, nil
}

// alterGroupConfigs changes one group's configs (IncrementalAlterConfigs,
// or AlterConfigs with replace) and persists them before answering; the
// share coordinator gets them before any later request of the client's.
func (b *Broker) alterGroupConfigs(name string, changes []configChange, replace, validateOnly bool) error {
	if name == "" {
		return &topicError{kerr.InvalidRequest.Code, "Default group resources are not allowed."}
	}
	b.groupCfg.mu.Lock()
	defer b.groupCfg.mu.Unlock()
	current := b.groupCfg.stored[name]
	next, err := applyChanges(current, changes, replace, func(string) (bool, string) { return false, "" }, func(key string) error {
		return &topicError{kerr.InvalidConfig.Code, fmt.Sprintf("Can't %s to key %s because its type is not LIST.", opName(key, changes), key)}
	})
	if err != nil {
		return err
	}
	if err := b.groupConfigDefaults().Validate(next); err != nil {
		return &topicError{kerr.InvalidConfig.Code, err.Error()}
	}
	if validateOnly {
		return nil
	}
	for k, v := range next {
		spec, _ := groupconfig.Lookup(k)
		next[k] = topics.Canonical(spec.Type, v)
	}
	set, remove := entityChanges(current, next)
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	if err := b.groupCfg.store.Apply(url.QueryEscape(name), set, remove); err != nil {
		return fmt.Errorf("persisting the configs of group %s: %w", name, err)
	}
	stored, rev, err := b.groupCfg.store.Load()
	if err != nil {
		return fmt.Errorf("reloading group configs: %w", err)
	}
	b.groupCfg.rev = max(b.groupCfg.rev, rev)
	b.setGroupConfigs(stored)
	b.log.Info("altered group configs", "group", name, "configs", next)
	return nil
}
