// Package topics is Apache's rules for topics, with no I/O: legal names,
// the 31 topic configs of Kafka 3.7 with their types, defaults and
// validation, and how a topic's overrides resolve against broker defaults
// into the partition log's configuration.
package topics

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ConfigType is a config's value type as DescribeConfigs v3+ reports it
// (Apache's DescribeConfigsResponse.ConfigType ids).
type ConfigType int8

// Config types.
const (
	TypeBoolean ConfigType = 1
	TypeString  ConfigType = 2
	TypeInt     ConfigType = 3
	TypeLong    ConfigType = 5
	TypeDouble  ConfigType = 6
	TypeList    ConfigType = 7
)

// Synonym is a broker config that supplies a topic config's default,
// with the factor that converts its unit to the topic config's (hours to
// milliseconds for log.retention.hours, for example).
type Synonym struct {
	Name   string
	Factor int64
}

// ConfigSpec describes one topic config as Apache 3.7's LogConfig defines
// it: type, default, validation, documentation and the broker configs
// that supply its default, in priority order (ServerTopicConfigSynonyms).
type ConfigSpec struct {
	Name     string
	Type     ConfigType
	Default  string
	Validate func(string) error
	Doc      string
	Synonyms []Synonym
}

// Long.MAX_VALUE, Apache's "unlimited" for several configs.
const maxLong = "9223372036854775807"

// Validators, with Apache's ConfigDef wording.

func longAtLeast(min int64) func(string) error {
	return numberIn(min, math.MaxInt64, "LONG")
}

func intAtLeast(min int64) func(string) error {
	return numberIn(min, math.MaxInt32, "INT")
}

func numberIn(min, max int64, typ string) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n > max {
			return fmt.Errorf("Not a number of type %s", typ)
		}
		if n < min {
			return fmt.Errorf("Value must be at least %d", min)
		}
		return nil
	}
}

func anyLong(v string) error { return longAtLeast(math.MinInt64)(v) }

// LongAtLeast and IntAtLeast are ConfigDef's Range.atLeast for a LONG
// and an INT; AnyDouble is a DOUBLE with no range (for broker configs).
func LongAtLeast(min int64) func(string) error { return longAtLeast(min) }

// IntAtLeast is Range.atLeast for an INT.
func IntAtLeast(min int64) func(string) error { return intAtLeast(min) }

// AnyDouble accepts any DOUBLE.
func AnyDouble(v string) error {
	if _, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
		return fmt.Errorf("Not a number of type DOUBLE")
	}
	return nil
}

func isBool(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "false":
		return nil
	}
	return fmt.Errorf("Expected value to be either true or false")
}

func ratio(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return fmt.Errorf("Not a number of type DOUBLE")
	}
	if f < 0 || f > 1 {
		return fmt.Errorf("Value must be between 0 and 1")
	}
	return nil
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("String must be one of: %s", strings.Join(allowed, ", "))
	}
}

func anyString(string) error { return nil }

// onlyDefault wraps a validator: the default value passes, anything else
// is refused with a message naming what kaas does not do yet.
func onlyDefault(def, why string, validate func(string) error) func(string) error {
	return func(v string) error {
		if err := validate(v); err != nil {
			return err
		}
		if strings.TrimSpace(v) != def {
			return fmt.Errorf("%w: %s", errNotSupported, why)
		}
		return nil
	}
}

// errNotSupported marks valid Kafka settings kaas refuses because it does
// not implement them (the message says so, with INVALID_CONFIG).
var errNotSupported = errors.New("not supported yet")

// cleanupPolicy is a LIST of compact and delete (Apache's
// ValidList.in("compact", "delete")): compact keeps the latest record per
// key (the log cleaner), delete removes old segments by retention.ms and
// retention.bytes, both together apply both.
func cleanupPolicy(v string) error {
	for _, p := range splitList(v) {
		if p != PolicyCompact && p != PolicyDelete {
			return fmt.Errorf("String must be one of: compact, delete")
		}
	}
	return nil
}

// The cleanup.policy words.
const (
	PolicyCompact = "compact"
	PolicyDelete  = "delete"
)

// HasPolicy reports whether a cleanup.policy value holds word.
func HasPolicy(value, word string) bool {
	for _, p := range splitList(value) {
		if p == word {
			return true
		}
	}
	return false
}

// splitList splits a LIST value as Apache's ConfigDef does (commas,
// surrounding spaces trimmed, empty items dropped).
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func hours(n string) Synonym   { return Synonym{Name: n, Factor: 3600 * 1000} }
func minutes(n string) Synonym { return Synonym{Name: n, Factor: 60 * 1000} }
func same(n string) Synonym    { return Synonym{Name: n, Factor: 1} }

// kaasNote marks configs that kaas stores and describes but does not act
// on, so tools that set them routinely keep working.
const kaasNote = " (kaas: stored and described; it has no effect here.)"

// Specs are the 31 topic configs of Apache Kafka 3.7, keyed by name.
var Specs = func() map[string]ConfigSpec {
	list := []ConfigSpec{
		{"cleanup.policy", TypeList, "delete", cleanupPolicy,
			"The retention policy of old log segments: delete removes segments past the retention time or size limit, compact keeps the latest record of every key (the log cleaner), compact,delete both.",
			[]Synonym{same("log.cleanup.policy")}},
		{"compression.type", TypeString, "producer",
			onlyDefault("producer", "kaas stores record batches as produced; use producer",
				oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
			"The final compression type of the topic's data; producer keeps the codec the producer chose. (kaas: only producer is supported.)",
			[]Synonym{same("compression.type")}},
		{"delete.retention.ms", TypeLong, "86400000", longAtLeast(0),
			"How long a tombstone (a record with a null value) and a transaction marker are kept in a compacted topic after the cleaner first passed the batch holding it.",
			[]Synonym{same("log.cleaner.delete.retention.ms")}},
		{"file.delete.delay.ms", TypeLong, "60000", longAtLeast(0),
			"How long to wait before removing a deleted segment's files from the filesystem, so fetches still reading it can finish.",
			[]Synonym{same("log.segment.delete.delay.ms")}},
		{"flush.messages", TypeLong, maxLong, longAtLeast(1),
			"The number of messages after which the log is fsynced. (kaas: durability is broker-wide: by default every acknowledged write is fsynced first, --flush-interval-ms trades that for throughput.)",
			[]Synonym{same("log.flush.interval.messages")}},
		{"flush.ms", TypeLong, maxLong, longAtLeast(0),
			"The time after which the log is fsynced. (kaas: durability is broker-wide, see flush.messages.)",
			[]Synonym{same("log.flush.interval.ms"), same("log.flush.scheduler.interval.ms")}},
		{"follower.replication.throttled.replicas", TypeList, "", anyString,
			"Replicas whose log replication is throttled on the follower side." + kaasNote, nil},
		{"index.interval.bytes", TypeInt, "4096", intAtLeast(0),
			"How often, in bytes of log, an entry is added to the offset index.",
			[]Synonym{same("log.index.interval.bytes")}},
		{"leader.replication.throttled.replicas", TypeList, "", anyString,
			"Replicas whose log replication is throttled on the leader side." + kaasNote, nil},
		{"local.retention.bytes", TypeLong, "-2", longAtLeast(-2),
			"The local log size limit before segments become eligible for deletion when tiered storage is on." + kaasNote,
			[]Synonym{same("log.local.retention.bytes")}},
		{"local.retention.ms", TypeLong, "-2", longAtLeast(-2),
			"The local log age limit before segments become eligible for deletion when tiered storage is on." + kaasNote,
			[]Synonym{same("log.local.retention.ms")}},
		{"max.compaction.lag.ms", TypeLong, maxLong, longAtLeast(1),
			"The longest a record stays uncompacted: a log with dirty records older than this is cleaned whatever its dirty ratio.",
			[]Synonym{same("log.cleaner.max.compaction.lag.ms")}},
		{"max.message.bytes", TypeInt, "1048588", intAtLeast(0),
			"The largest record batch size the topic accepts; larger batches get MESSAGE_TOO_LARGE.",
			[]Synonym{same("message.max.bytes")}},
		{"message.downconversion.enable", TypeBoolean, "true", isBool,
			"Whether the broker may down-convert records for old consumers." + kaasNote,
			[]Synonym{same("log.message.downconversion.enable")}},
		{"message.format.version", TypeString, "3.0-IV1", anyString,
			"Deprecated: the message format version; ignored since Kafka 3.0." + kaasNote,
			[]Synonym{same("log.message.format.version")}},
		{"message.timestamp.after.max.ms", TypeLong, maxLong,
			onlyDefault(maxLong, "kaas does not check record timestamps", longAtLeast(0)),
			"How far a CreateTime record timestamp may be ahead of the broker's clock. (kaas: only the default is supported.)",
			[]Synonym{same("log.message.timestamp.after.max.ms")}},
		{"message.timestamp.before.max.ms", TypeLong, maxLong,
			onlyDefault(maxLong, "kaas does not check record timestamps", longAtLeast(0)),
			"How far a CreateTime record timestamp may be behind the broker's clock. (kaas: only the default is supported.)",
			[]Synonym{same("log.message.timestamp.before.max.ms")}},
		{"message.timestamp.difference.max.ms", TypeLong, maxLong,
			onlyDefault(maxLong, "kaas does not check record timestamps", longAtLeast(0)),
			"Deprecated: the largest allowed difference between a record timestamp and the broker's clock. (kaas: only the default is supported.)",
			[]Synonym{same("log.message.timestamp.difference.max.ms")}},
		{"message.timestamp.type", TypeString, "CreateTime", oneOf("CreateTime", "LogAppendTime"),
			"Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).",
			[]Synonym{same("log.message.timestamp.type")}},
		{"min.cleanable.dirty.ratio", TypeDouble, "0.5", ratio,
			"The share of a compacted log's bytes not yet cleaned above which the cleaner cleans it.",
			[]Synonym{same("log.cleaner.min.cleanable.ratio")}},
		{"min.compaction.lag.ms", TypeLong, "0", longAtLeast(0),
			"The shortest a record stays uncompacted: the cleaner leaves segments holding newer records alone.",
			[]Synonym{same("log.cleaner.min.compaction.lag.ms")}},
		{"min.insync.replicas", TypeInt, "1", intAtLeast(1),
			"With acks=all, the fewest in-sync replicas that must acknowledge a write; more than 1 on a single replica makes acks=all produce fail with NOT_ENOUGH_REPLICAS.",
			[]Synonym{same("min.insync.replicas")}},
		{"preallocate", TypeBoolean, "false", isBool,
			"Whether segment files are preallocated on disk." + kaasNote,
			[]Synonym{same("log.preallocate")}},
		{"remote.storage.enable", TypeBoolean, "false",
			onlyDefault("false", "tiered storage functionality is disabled in the broker", isBool),
			"Whether the topic uses tiered storage. (kaas: not supported.)", nil},
		{"retention.bytes", TypeLong, "-1", anyLong,
			"The size a partition's log may grow to before whole old segments are deleted; -1 is unlimited.",
			[]Synonym{same("log.retention.bytes")}},
		{"retention.ms", TypeLong, "604800000", longAtLeast(-1),
			"How long a segment is kept after its newest record before it is deleted; -1 keeps it forever.",
			[]Synonym{same("log.retention.ms"), minutes("log.retention.minutes"), hours("log.retention.hours")}},
		{"segment.bytes", TypeInt, "1073741824", intAtLeast(MinSegmentBytes),
			"The segment file size: a new segment is rolled before a batch that would make it larger. At least 1 MiB (Kafka 4.0, KIP-1030).",
			[]Synonym{same("log.segment.bytes")}},
		{"segment.index.bytes", TypeInt, "10485760", intAtLeast(4),
			"The size of a segment's offset index." + kaasNote,
			[]Synonym{same("log.index.size.max.bytes")}},
		{"segment.jitter.ms", TypeLong, "0", longAtLeast(0),
			"The largest random jitter subtracted from segment.ms." + kaasNote,
			[]Synonym{same("log.roll.jitter.ms"), hours("log.roll.jitter.hours")}},
		{"segment.ms", TypeLong, "604800000", longAtLeast(1),
			"The age after which a segment is rolled even if not full, measured between record timestamps.",
			[]Synonym{same("log.roll.ms"), hours("log.roll.hours")}},
		{"unclean.leader.election.enable", TypeBoolean, "false", isBool,
			"Whether an out-of-sync replica may become leader." + kaasNote,
			[]Synonym{same("unclean.leader.election.enable")}},
	}
	m := make(map[string]ConfigSpec, len(list))
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}()

// SpecNames lists the topic config names in order.
func SpecNames() []string {
	names := make([]string, 0, len(Specs))
	for n := range Specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// IsList reports whether a topic config is a LIST (APPEND and SUBTRACT
// apply only to those).
func IsList(name string) bool { return Specs[name].Type == TypeList }

// MinSegmentBytes is segment.bytes' floor, Kafka 4.0's (KIP-1030; 3.7
// accepted 14): with tiny segments every produce rolls a segment, and one
// client's topic could exhaust the broker's file descriptors.
const MinSegmentBytes = 1 << 20

// InternalSegmentBytes is Apache's test-only topic config
// (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG, added with KIP-1030): when set
// it replaces segment.bytes, below its floor. It is not one of the Specs:
// DescribeConfigs does not list it, and ValidateConfigs refuses it as an
// unknown name unless the broker allows internal configs (tests only), so
// no client can bring back tiny segments.
const InternalSegmentBytes = "internal.segment.bytes"

// ValidateConfigs checks topic overrides as Apache's LogConfig.validate:
// every name known, every value valid, and the cross-config rules. The
// error message is what the client sees with INVALID_CONFIG. internal
// allows InternalSegmentBytes.
func ValidateConfigs(configs map[string]string, internal bool) error {
	names := make([]string, 0, len(configs))
	for k := range configs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := Specs[k]; !ok && !(internal && k == InternalSegmentBytes) {
			return fmt.Errorf("Unknown topic config name: %s", k)
		}
	}
	for _, k := range names {
		validate := intAtLeast(14) // InternalSegmentBytes: Apache 3.7's floor
		if spec, ok := Specs[k]; ok {
			validate = spec.Validate
		}
		if err := validate(configs[k]); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: %w", configs[k], k, err)
		}
	}
	minLag, maxLag := configs["min.compaction.lag.ms"], configs["max.compaction.lag.ms"]
	if minLag != "" && maxLag != "" {
		lo, _ := strconv.ParseInt(strings.TrimSpace(minLag), 10, 64)
		hi, _ := strconv.ParseInt(strings.TrimSpace(maxLag), 10, 64)
		if lo > hi {
			return fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", lo, hi)
		}
	}
	return nil
}

// Resolved is a topic's effective configuration, as the partition actors
// use it.
type Resolved struct {
	Log               LogConfig
	MaxMessageBytes   int32
	LogAppendTime     bool
	MinInsyncReplicas int32
}

// LogConfig is the part of a topic's configuration its partitions' logs
// apply: storage/partlog.Config field for field (the broker converts one
// into the other, so the compiler holds the two to the same fields),
// declared here so this package needs nothing of storage.
type LogConfig struct {
	SegmentBytes       int64         // segment.bytes (internal.segment.bytes overrides it)
	SegmentMs          int64         // segment.ms
	RetentionMs        int64         // retention.ms, -1 keeps forever
	RetentionBytes     int64         // retention.bytes, -1 is unlimited
	IndexIntervalBytes int64         // index.interval.bytes
	FileDeleteDelay    time.Duration // file.delete.delay.ms
	Compact, Delete    bool          // cleanup.policy
	MinCleanableRatio  float64       // min.cleanable.dirty.ratio
	MinCompactionLagMs int64         // min.compaction.lag.ms
	MaxCompactionLagMs int64         // max.compaction.lag.ms
	DeleteRetentionMs  int64         // delete.retention.ms
}

// Effective returns a config's value: the topic override if any, else
// the broker's default for it, else the spec's default.
func Effective(name string, overrides, brokerDefaults map[string]string) string {
	if v, ok := overrides[name]; ok {
		return v
	}
	if v, ok := brokerDefaults[name]; ok {
		return v
	}
	return Specs[name].Default
}

// Resolve layers topic overrides over broker defaults (keyed by topic
// config name).
func Resolve(overrides, brokerDefaults map[string]string) Resolved {
	get := func(name string) int64 {
		n, err := strconv.ParseInt(strings.TrimSpace(Effective(name, overrides, brokerDefaults)), 10, 64)
		if err != nil {
			n, _ = strconv.ParseInt(Specs[name].Default, 10, 64)
		}
		return n
	}
	var r Resolved
	r.Log.SegmentBytes = get("segment.bytes")
	if v, ok := overrides[InternalSegmentBytes]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			r.Log.SegmentBytes = n
		}
	}
	r.Log.SegmentMs = get("segment.ms")
	r.Log.RetentionMs = get("retention.ms")
	r.Log.RetentionBytes = get("retention.bytes")
	r.Log.IndexIntervalBytes = get("index.interval.bytes")
	r.Log.FileDeleteDelay = time.Duration(get("file.delete.delay.ms")) * time.Millisecond
	policy := Effective("cleanup.policy", overrides, brokerDefaults)
	r.Log.Compact = HasPolicy(policy, PolicyCompact)
	r.Log.Delete = HasPolicy(policy, PolicyDelete)
	r.Log.MinCompactionLagMs = get("min.compaction.lag.ms")
	r.Log.MaxCompactionLagMs = get("max.compaction.lag.ms")
	r.Log.DeleteRetentionMs = get("delete.retention.ms")
	r.Log.MinCleanableRatio = 0.5
	if f, err := strconv.ParseFloat(strings.TrimSpace(Effective("min.cleanable.dirty.ratio", overrides, brokerDefaults)), 64); err == nil {
		r.Log.MinCleanableRatio = f
	}
	r.MaxMessageBytes = int32(min(get("max.message.bytes"), math.MaxInt32))
	r.MinInsyncReplicas = int32(min(get("min.insync.replicas"), math.MaxInt32))
	r.LogAppendTime = Effective("message.timestamp.type", overrides, brokerDefaults) == "LogAppendTime"
	return r
}

// Canonical is a valid value in the form Apache describes it back
// (ConfigDef parses the value, convertToString prints it): numbers and
// strings trimmed, booleans in lower case, list items trimmed and joined
// by commas.
func Canonical(typ ConfigType, v string) string {
	v = strings.TrimSpace(v)
	switch typ {
	case TypeInt, TypeLong:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return strconv.FormatInt(n, 10)
		}
	case TypeBoolean:
		return strings.ToLower(v)
	case TypeDouble:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1e7 {
				return strconv.FormatFloat(f, 'f', 1, 64) // Java's Double.toString: 1.0
			}
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	case TypeList:
		return strings.Join(splitList(v), ",")
	}
	return v
}

// CanonicalConfigs returns topic overrides in canonical form.
func CanonicalConfigs(configs map[string]string) map[string]string {
	if configs == nil {
		return nil
	}
	out := make(map[string]string, len(configs))
	for k, v := range configs {
		typ := Specs[k].Type
		if k == InternalSegmentBytes {
			typ = TypeInt
		}
		out[k] = Canonical(typ, v)
	}
	return out
}
