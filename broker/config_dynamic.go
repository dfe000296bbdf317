package broker

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/messages"
	"kaas/state/brokerconfig"
	"kaas/state/topics"
	"kaas/storage/configstore"
	"kaas/storage/partlog"
)

// configStore is where the dynamic broker config layers live: a file on
// the volume for one broker, etcd (coord.ConfigStore) in a cluster.
type configStore interface {
	Load(perBroker bool) (map[string]string, error)
	Save(perBroker bool, values map[string]string) error
}

// loadBrokerConfigs opens the dynamic broker config store and builds the
// layers topics resolve their defaults from. The static layer is
// completed with the bound addresses once the listener is up.
func (b *Broker) loadBrokerConfigs() error {
	store := b.configStore
	if store == nil {
		fs, err := configstore.OpenStore(b.env, b.cfg.BrokerID)
		if err != nil {
			return err
		}
		store = fs
	}
	clusterDefault, err := store.Load(false)
	if err != nil {
		return fmt.Errorf("loading dynamic broker configs: %w", err)
	}
	perBroker, err := store.Load(true)
	if err != nil {
		return fmt.Errorf("loading dynamic broker configs: %w", err)
	}
	b.configStore = store
	b.configs.Store(brokerconfig.NewLayers(b.cfg.staticBrokerConfigs("", ""), clusterDefault, perBroker))
	return nil
}

// topicDefaults are the topic configs' defaults from the broker configs.
func (b *Broker) topicDefaults() map[string]string { return b.configs.Load().TopicDefaults() }

func updateConfigMessage(r topics.Resolved) *messages.UpdateConfig {
	return &messages.UpdateConfig{Log: partlog.Config(r.Log), MaxMessageBytes: r.MaxMessageBytes, LogAppendTime: r.LogAppendTime, MinInsyncReplicas: r.MinInsyncReplicas}
}

// alterBrokerConfigs changes a dynamic broker config layer (perBroker:
// this broker's, else the cluster-wide default) to what modify makes of
// it, persists it, and re-resolves every topic, pushing changed configs
// to its partitions.
func (b *Broker) alterBrokerConfigs(perBroker, validateOnly bool, modify func(current map[string]string) (map[string]string, error)) error {
	b.lockTopics()
	defer b.topicsMu.Unlock()
	values, err := modify(b.configs.Load().Dynamic(perBroker))
	if err != nil {
		return err
	}
	if err := brokerconfig.ValidateDynamic(values); err != nil {
		return &topicError{kerr.InvalidRequest.Code, err.Error()}
	}
	if validateOnly {
		return nil
	}
	for k, v := range values {
		values[k] = topics.Canonical(brokerconfig.Specs[k].Type, v)
	}
	if err := b.configStore.Save(perBroker, values); err != nil {
		return fmt.Errorf("persisting broker configs: %w", err)
	}
	b.configs.Store(b.configs.Load().WithDynamic(perBroker, values))
	b.log.Info("altered dynamic broker configs", "cluster_default", !perBroker, "configs", values)
	b.cleaner.SetConfig(cleanerConfig(b.configs.Load()))
	defaults := b.topicDefaults()
	set := b.topics.load()
	for _, t := range sortedTopics(set) {
		resolved := topics.Resolve(t.meta.Configs, defaults)
		if resolved == t.resolved {
			continue
		}
		changed := &topic{meta: t.meta, resolved: resolved, parts: t.parts}
		set = set.with(changed)
		for _, p := range changed.parts {
			if p != nil {
				p.Send(updateConfigMessage(resolved))
			}
		}
	}
	b.topics.p.Store(set)
	return nil
}

// configEntry is one config of a described resource, independent of the
// DescribeConfigs and CreateTopics response shapes.
type configEntry struct {
	name     string
	value    *string
	source   brokerconfig.Source
	readOnly bool
	typ      topics.ConfigType
	doc      string
	synonyms []brokerconfig.Synonym
}

// topicConfigEntries describes a topic's configs as Apache's
// ConfigHelper.createTopicConfigEntry: the effective value, where it
// comes from (the topic override, else the first broker synonym found),
// and the synonyms in priority order. names, when not empty, filters.
func (b *Broker) topicConfigEntries(overrides map[string]string, names []string) []configEntry {
	layers := b.configs.Load()
	defaults := layers.TopicDefaults()
	var out []configEntry
	for _, name := range filterNames(topics.SpecNames(), names) {
		spec := topics.Specs[name]
		value := topics.Effective(name, overrides, defaults)
		synonyms := layers.TopicSynonyms(name)
		if v, ok := overrides[name]; ok {
			synonyms = append([]brokerconfig.Synonym{{Name: name, Value: v, Source: brokerconfig.SourceTopic}}, synonyms...)
		}
		source := brokerconfig.SourceDefault
		if len(synonyms) > 0 {
			source = synonyms[0].Source
		}
		out = append(out, configEntry{name: name, value: &value, source: source, typ: spec.Type, doc: spec.Doc, synonyms: synonyms})
	}
	return out
}

// brokerConfigEntries describes this broker's configs (perBroker) or the
// cluster-wide dynamic defaults as Apache's createBrokerConfigEntry.
func (b *Broker) brokerConfigEntries(perBroker bool, names []string) []configEntry {
	b.advertised("") // the static layer gets the bound addresses before ready
	layers := b.configs.Load()
	all := brokerconfig.Names()
	if !perBroker {
		all = sortedConfigNames(layers.DynamicDefault)
	}
	var out []configEntry
	for _, name := range filterNames(all, names) {
		spec := brokerconfig.Specs[name]
		value, _ := layers.Value(name)
		synonyms := layers.Synonyms(name)
		if !perBroker {
			v := layers.DynamicDefault[name]
			value = &v
			kept := synonyms[:0]
			for _, s := range synonyms {
				if s.Source == brokerconfig.SourceDynamicDefault {
					kept = append(kept, s)
				}
			}
			synonyms = kept
		}
		source := brokerconfig.SourceDefault
		if len(synonyms) > 0 {
			source = synonyms[0].Source
		}
		out = append(out, configEntry{name: name, value: value, source: source, readOnly: !spec.Dynamic, typ: spec.Type, doc: spec.Doc, synonyms: synonyms})
	}
	return out
}

// filterNames keeps the names asked for (all when none are); unknown
// names are skipped, as Apache does.
func filterNames(all, wanted []string) []string {
	if len(wanted) == 0 {
		return all
	}
	want := make(map[string]bool, len(wanted))
	for _, w := range wanted {
		want[w] = true
	}
	var out []string
	for _, n := range all {
		if want[n] {
			out = append(out, n)
		}
	}
	return out
}

func sortedConfigNames(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
