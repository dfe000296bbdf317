package brokerconfig

import (
	"maps"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/state/topics"
)

// Source says where a value comes from (Apache's ConfigSource ids, as
// DescribeConfigs v1+ reports them).
type Source = kmsg.ConfigSource

// Sources used here.
const (
	SourceTopic          = kmsg.ConfigSourceDynamicTopicConfig
	SourceDynamicBroker  = kmsg.ConfigSourceDynamicBrokerConfig
	SourceDynamicDefault = kmsg.ConfigSourceDynamicDefaultBrokerConfig
	SourceStatic         = kmsg.ConfigSourceStaticBrokerConfig
	SourceDefault        = kmsg.ConfigSourceDefaultConfig
)

// Layers are the four places a broker config value can come from, highest
// priority first. A Layers value is immutable once built: a change builds
// a new one, so readers on any goroutine need no lock.
type Layers struct {
	DynamicBroker  map[string]string // altered for this broker id
	DynamicDefault map[string]string // altered cluster-wide ("" resource)
	Static         map[string]string // set on the command line
	Defaults       map[string]string // built in (Apache's, or kaas's where it differs)
}

// NewLayers builds layers from the static values and the persisted dynamic
// ones; built-in defaults come from Specs.
func NewLayers(static, dynamicDefault, dynamicBroker map[string]string) *Layers {
	defaults := make(map[string]string)
	for name, s := range Specs {
		if s.Default != nil {
			defaults[name] = *s.Default
		}
	}
	return &Layers{
		DynamicBroker:  maps.Clone(orEmpty(dynamicBroker)),
		DynamicDefault: maps.Clone(orEmpty(dynamicDefault)),
		Static:         maps.Clone(orEmpty(static)),
		Defaults:       defaults,
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// WithDynamic returns a copy with a dynamic layer replaced: the per-broker
// one when perBroker, else the cluster-wide default.
func (l *Layers) WithDynamic(perBroker bool, values map[string]string) *Layers {
	n := *l
	if perBroker {
		n.DynamicBroker = maps.Clone(values)
	} else {
		n.DynamicDefault = maps.Clone(values)
	}
	return &n
}

// WithStatic returns a copy with the static layer replaced.
func (l *Layers) WithStatic(values map[string]string) *Layers {
	n := *l
	n.Static = maps.Clone(values)
	return &n
}

// Dynamic returns a dynamic layer (a copy).
func (l *Layers) Dynamic(perBroker bool) map[string]string {
	if perBroker {
		return maps.Clone(l.DynamicBroker)
	}
	return maps.Clone(l.DynamicDefault)
}

type layer struct {
	values map[string]string
	source Source
}

func (l *Layers) ordered() []layer {
	return []layer{
		{l.DynamicBroker, SourceDynamicBroker},
		{l.DynamicDefault, SourceDynamicDefault},
		{l.Static, SourceStatic},
		{l.Defaults, SourceDefault},
	}
}

// Value is a broker config's current value (nil when it has none, as
// log.retention.ms without an explicit setting) and where it comes from.
func (l *Layers) Value(name string) (*string, Source) {
	for _, ly := range l.ordered() {
		if v, ok := ly.values[name]; ok {
			return &v, ly.source
		}
	}
	return nil, SourceDefault
}

// Synonym is one entry of a DescribeConfigs synonym list.
type Synonym struct {
	Name   string
	Value  string
	Source Source
}

// Synonyms is Apache's ConfigHelper.configSynonyms for the broker config
// name: every layer's value of every synonym, layers outermost, then the
// entries before the first one named name dropped (so describing
// log.retention.ms does not list log.retention.hours alone).
func (l *Layers) Synonyms(name string) []Synonym {
	var all []Synonym
	for _, ly := range l.ordered() {
		for _, syn := range SynonymNames(name) {
			if v, ok := ly.values[syn]; ok {
				all = append(all, Synonym{Name: syn, Value: v, Source: ly.source})
			}
		}
	}
	for len(all) > 0 && all[0].Name != name {
		all = all[1:]
	}
	return all
}

// TopicDefaults are the topic configs' defaults as this broker's configs
// set them, keyed by topic config name: for each topic config the first
// of its broker synonyms (in priority order) that has a value in any
// layer, converted to the topic config's unit — Apache's
// KafkaConfig.extractLogConfigMap.
func (l *Layers) TopicDefaults() map[string]string {
	out := make(map[string]string, len(topics.Specs))
	for name, spec := range topics.Specs {
		for _, syn := range spec.Synonyms {
			v, _ := l.Value(syn.Name)
			if v == nil {
				continue
			}
			if syn.Factor != 1 {
				n, err := strconv.ParseInt(strings.TrimSpace(*v), 10, 64)
				if err != nil {
					continue
				}
				*v = strconv.FormatInt(n*syn.Factor, 10)
			}
			out[name] = *v
			break
		}
	}
	return out
}

// TopicSynonyms is the synonym list of a topic config without a topic
// override: its first broker synonym's list (Apache's
// createTopicConfigEntry), or nothing for configs no broker config sets.
func (l *Layers) TopicSynonyms(topicConfig string) []Synonym {
	spec := topics.Specs[topicConfig]
	if len(spec.Synonyms) == 0 {
		return nil
	}
	return l.Synonyms(spec.Synonyms[0].Name)
}
