// Package brokerconfig is the broker's own configuration as DescribeConfigs
// and IncrementalAlterConfigs see it: the broker configs kaas has (their
// types, Apache 3.7 defaults, documentation and whether they can change at
// run time), the four layers a value can come from (dynamic per-broker,
// dynamic cluster-wide default, static from the command line, built-in
// default), and the persisted dynamic layers under <data>/__cluster/configs.
package brokerconfig

import (
	"fmt"
	"sort"

	"kaas/state/topics"
)

// Spec is one broker config.
type Spec struct {
	Name    string
	Type    topics.ConfigType
	Default *string // nil: no default (Apache's null), e.g. log.retention.ms
	// Dynamic configs can be altered at run time (Apache's
	// DynamicBrokerConfig.AllDynamicConfigs); the others are read-only.
	Dynamic bool
	Doc     string
	// Topic is the topic config this one supplies the default for, and
	// Factor converts its unit to that config's ("" for broker-only
	// configs).
	Topic  string
	Factor int64
	// Validate checks a dynamic broker-only config's value (topic
	// defaults use their topic config's validator).
	Validate func(string) error
}

func str(s string) *string { return &s }

// brokerOnly are the broker configs that are not topic defaults. kaas
// sets them from `kaas serve` flags; none can change at run time.
var brokerOnly = []Spec{
	{Name: "broker.id", Type: topics.TypeInt, Default: str("-1"), Doc: "This broker's id (--broker-id)."},
	{Name: "node.id", Type: topics.TypeInt, Default: str("-1"), Doc: "This node's id, the same as broker.id (--broker-id)."},
	{Name: "listeners", Type: topics.TypeString, Default: str("PLAINTEXT://:9092"), Doc: "The address the broker listens on (--listen)."},
	{Name: "advertised.listeners", Type: topics.TypeString, Doc: "The address given to clients in metadata (--advertised-listener; by default the listen address)."},
	{Name: "log.dirs", Type: topics.TypeString, Doc: "The data directory holding partition logs and cluster metadata (--data)."},
	{Name: "num.partitions", Type: topics.TypeInt, Default: str("1"), Doc: "The partition count of auto-created topics and of CreateTopics with -1 partitions (--default-partitions)."},
	{Name: "default.replication.factor", Type: topics.TypeInt, Default: str("1"), Doc: "The replication factor of auto-created topics; kaas keeps one replica."},
	{Name: "auto.create.topics.enable", Type: topics.TypeBoolean, Default: str("true"), Doc: "Whether Metadata and Produce create unknown topics (--auto-create-topics)."},
	{Name: "socket.request.max.bytes", Type: topics.TypeInt, Default: str("104857600"), Doc: "The largest request frame accepted; a larger one closes the connection (--max-request-bytes)."},
	{Name: "max.connections", Type: topics.TypeInt, Default: str("2147483647"), Doc: "Open connections at which accepting waits until one closes (--max-connections)."},
	{Name: "max.connections.per.ip", Type: topics.TypeInt, Default: str("2147483647"), Doc: "Open connections from one address beyond which new ones are closed at once (--max-connections-per-ip)."},
	{Name: "queued.max.request.bytes", Type: topics.TypeLong, Default: str("536870912"), Doc: "Request bytes held in memory across connections before connections stop being read (--queued-max-request-bytes; Apache's default is -1, unbounded)."},
	{Name: "connections.max.idle.ms", Type: topics.TypeLong, Default: str("600000"), Doc: "A connection with nothing in flight that has neither sent nor received a byte for this long is closed (--connections-max-idle)."},
	{Name: "fetch.max.bytes", Type: topics.TypeInt, Default: str("57671680"), Doc: "The most record bytes one Fetch answer carries, whatever the request asks (--fetch-max-bytes)."},
	{Name: "max.incremental.fetch.session.cache.slots", Type: topics.TypeInt, Default: str("1000"), Doc: "The most incremental fetch sessions (KIP-227) the broker keeps (--max-incremental-fetch-session-cache-slots)."},
	{Name: "min.incremental.fetch.session.eviction.ms", Type: topics.TypeInt, Default: str("120000"), Doc: "How long a fetch session goes unused before any new one may take its slot (--min-incremental-fetch-session-eviction)."},
	{Name: "num.network.threads", Type: topics.TypeInt, Default: str("1"), Doc: "The number of network event loops (--event-loops)."},
	{Name: "log.retention.check.interval.ms", Type: topics.TypeLong, Default: str("300000"), Doc: "How often retention runs (--retention-check-interval)."},
	{Name: "producer.id.expiration.ms", Type: topics.TypeInt, Default: str("86400000"), Doc: "How long a producer id's state is kept after its last write."},
	{Name: "offsets.topic.num.partitions", Type: topics.TypeInt, Default: str("50"), Doc: "The number of consumer group coordinator slots."},
	{Name: "transaction.state.log.num.partitions", Type: topics.TypeInt, Default: str("50"), Doc: "The number of transaction coordinator slots."},
	{Name: "transaction.max.timeout.ms", Type: topics.TypeInt, Default: str("900000"), Doc: "The largest transaction timeout a producer may ask for."},
	{Name: "transactional.id.expiration.ms", Type: topics.TypeInt, Default: str("604800000"), Doc: "How long an idle transactional id is kept."},
	{Name: "group.coordinator.rebalance.protocols", Type: topics.TypeList, Default: str("classic,consumer"), Doc: "The group protocols the coordinator runs: classic (JoinGroup/SyncGroup) and consumer (KIP-848)."},
	{Name: "group.consumer.heartbeat.interval.ms", Type: topics.TypeInt, Default: str("5000"), Doc: "The heartbeat interval given to consumer group members (--group-consumer-heartbeat-interval)."},
	{Name: "group.consumer.session.timeout.ms", Type: topics.TypeInt, Default: str("45000"), Doc: "How long a consumer group member may go without heartbeating before it is fenced (--group-consumer-session-timeout)."},
	{Name: "group.consumer.assignors", Type: topics.TypeList, Default: str("uniform,range"), Doc: "The server-side assignors consumer group members may ask for; the first is the default (--group-consumer-assignors)."},
	{Name: "group.consumer.max.size", Type: topics.TypeInt, Default: str("2147483647"), Doc: "The most members a consumer group may have (--group-consumer-max-size)."},
	{Name: "group.consumer.migration.policy", Type: topics.TypeString, Default: str("bidirectional"), Doc: "Which groups may convert between the classic and the consumer protocol while they have members (--group-consumer-migration-policy); empty groups always convert."},
	{Name: "group.share.heartbeat.interval.ms", Type: topics.TypeInt, Default: str("5000"), Doc: "The heartbeat interval given to share group members (--group-share-heartbeat-interval)."},
	{Name: "group.share.session.timeout.ms", Type: topics.TypeInt, Default: str("45000"), Doc: "How long a share group member may go without heartbeating before it is fenced and its records released (--group-share-session-timeout)."},
	{Name: "group.share.record.lock.duration.ms", Type: topics.TypeInt, Default: str("30000"), Doc: "How long a share group member holds a record it fetched before it is delivered again (--group-share-record-lock-duration)."},
	{Name: "group.share.delivery.count.limit", Type: topics.TypeInt, Default: str("5"), Doc: "A record delivered this many times to a share group is archived instead of delivered again (--group-share-delivery-count-limit)."},
	{Name: "group.share.partition.max.record.locks", Type: topics.TypeInt, Default: str("2000"), Doc: "The most records in flight in one share-partition (--group-share-partition-max-record-locks)."},
	{Name: "group.share.max.size", Type: topics.TypeInt, Default: str("200"), Doc: "The most members a share group may have (--group-share-max-size)."},
	{Name: "group.share.max.share.sessions", Type: topics.TypeInt, Default: str("2000"), Doc: "The most share sessions this broker keeps (--group-share-max-share-sessions)."},
	// The log cleaner's (Apache's CleanerConfig); the dynamic ones are
	// LogCleaner.ReconfigurableConfigs, applied without a restart.
	{Name: "log.cleaner.enable", Type: topics.TypeBoolean, Default: str("true"), Doc: "Whether the log cleaner runs (compacted topics are never cleaned without it)."},
	{Name: "log.cleaner.threads", Type: topics.TypeInt, Default: str("1"), Dynamic: true, Validate: topics.IntAtLeast(0),
		Doc: "The number of partitions cleaned at once."},
	{Name: "log.cleaner.dedupe.buffer.size", Type: topics.TypeLong, Default: str("134217728"), Dynamic: true, Validate: topics.LongAtLeast(0),
		Doc: "The memory the cleaners' key-to-offset maps may take, shared between the threads; a partition whose dirty keys do not fit is cleaned in several passes."},
	{Name: "log.cleaner.io.buffer.size", Type: topics.TypeInt, Default: str("524288"), Dynamic: true, Validate: topics.IntAtLeast(0),
		Doc: "The read and write buffer of each cleaner thread."},
	{Name: "log.cleaner.io.buffer.load.factor", Type: topics.TypeDouble, Default: str("0.9"), Dynamic: true, Validate: topics.AnyDouble,
		Doc: "How full the key-to-offset map may get (kaas sizes its map by bytes: the dedupe buffer is its budget)."},
	{Name: "log.cleaner.io.max.bytes.per.second", Type: topics.TypeDouble, Default: str("1.7976931348623157E308"), Dynamic: true, Validate: topics.AnyDouble,
		Doc: "The cleaners' read and write throughput limit, in bytes per second, across threads."},
	{Name: "log.cleaner.backoff.ms", Type: topics.TypeLong, Default: str("15000"), Dynamic: true, Validate: topics.LongAtLeast(0),
		Doc: "How long the cleaner sleeps when no log needs cleaning."},
}

// topicDefaultTypes are the broker synonyms whose type differs from their
// topic config's (hours and minutes are INT in Apache).
var synonymTypes = map[string]topics.ConfigType{
	"log.roll.hours":                  topics.TypeInt,
	"log.roll.jitter.hours":           topics.TypeInt,
	"log.retention.minutes":           topics.TypeInt,
	"log.retention.hours":             topics.TypeInt,
	"log.flush.scheduler.interval.ms": topics.TypeLong,
}

// synonymDefaults are Apache's defaults of broker synonyms where they
// differ from the topic config's default: the ms forms have none (the
// hours form supplies it), the unit variants are in their own unit.
var synonymDefaults = map[string]*string{
	"log.roll.ms":                 nil,
	"log.roll.hours":              str("168"),
	"log.roll.jitter.ms":          nil,
	"log.roll.jitter.hours":       str("0"),
	"log.retention.ms":            nil,
	"log.retention.minutes":       nil,
	"log.retention.hours":         str("168"),
	"log.flush.interval.ms":       nil,
	"log.flush.interval.messages": str("1"), // kaas: every acknowledged write is fsynced first
}

// Specs are every broker config kaas describes, keyed by name. The first
// synonym of each topic config is dynamic, as in Apache
// (DynamicLogConfig.ReconfigurableConfigs); unit variants such as
// log.retention.hours are read-only.
var Specs = func() map[string]Spec {
	m := make(map[string]Spec)
	for _, s := range brokerOnly {
		m[s.Name] = s
	}
	for _, topic := range topics.SpecNames() {
		ts := topics.Specs[topic]
		for i, syn := range ts.Synonyms {
			s := Spec{Name: syn.Name, Type: ts.Type, Default: str(ts.Default), Dynamic: i == 0, Topic: topic, Factor: syn.Factor}
			if t, ok := synonymTypes[syn.Name]; ok {
				s.Type = t
			}
			if d, ok := synonymDefaults[syn.Name]; ok {
				s.Default = d
			}
			switch syn.Factor {
			case 1:
				s.Doc = fmt.Sprintf("The default of the topic config %s: %s", topic, ts.Doc)
			case 60 * 1000:
				s.Doc = fmt.Sprintf("The default of the topic config %s, in minutes, used when the ms form is not set.", topic)
			default:
				s.Doc = fmt.Sprintf("The default of the topic config %s, in hours, used when the finer forms are not set.", topic)
			}
			if syn.Name == "log.flush.scheduler.interval.ms" {
				s.Dynamic = false
				s.Doc = "How often the log flusher checks whether a log needs an fsync; the default of flush.ms when log.flush.interval.ms is not set." +
					" (kaas: durability is broker-wide, see --flush-interval-ms.)"
			}
			m[s.Name] = s
		}
	}
	return m
}()

// Names lists every broker config name in order.
func Names() []string {
	out := make([]string, 0, len(Specs))
	for n := range Specs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SynonymNames is Apache's DynamicBrokerConfig.brokerConfigSynonyms: the
// configs that set the same thing, in priority order.
func SynonymNames(name string) []string {
	groups := [][]string{
		{"log.roll.ms", "log.roll.hours"},
		{"log.roll.jitter.ms", "log.roll.jitter.hours"},
		{"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
	}
	for _, g := range groups {
		for _, n := range g {
			if n == name {
				return g
			}
		}
	}
	if name == "log.flush.interval.ms" {
		return []string{"log.flush.interval.ms", "log.flush.scheduler.interval.ms"}
	}
	return []string{name}
}
