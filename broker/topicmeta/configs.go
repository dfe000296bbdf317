package topicmeta

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"kaas/broker/storage"
)

// ConfigSpec describes one topic config key: its broker-level name, how to
// validate a value, and whether kaas acts on it (the others are stored and
// described, as clients and tools set them routinely).
type ConfigSpec struct {
	Name       string
	BrokerName string // the broker config that supplies the default
	Default    string
	Validate   func(string) error
	Sensitive  bool
}

func isLong(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("value %q is not a number", v)
		}
		if n < min {
			return fmt.Errorf("value %d is below the minimum %d", n, min)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("value %q is not one of %v", v, allowed)
	}
}

func cleanupPolicy(v string) error {
	switch v {
	case "delete":
		return nil
	case "compact", "compact,delete", "delete,compact":
		return fmt.Errorf("cleanup.policy=%s is not supported yet: kaas has no log compaction; use delete", v)
	}
	return fmt.Errorf("value %q is not a valid cleanup.policy", v)
}

// Specs are the topic configs kaas knows, keyed by name.
var Specs = func() map[string]ConfigSpec {
	list := []ConfigSpec{
		{Name: "cleanup.policy", BrokerName: "log.cleanup.policy", Default: "delete", Validate: cleanupPolicy},
		{Name: "compression.type", BrokerName: "compression.type", Default: "producer", Validate: oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")},
		{Name: "delete.retention.ms", BrokerName: "log.cleaner.delete.retention.ms", Default: "86400000", Validate: isLong(0)},
		{Name: "file.delete.delay.ms", BrokerName: "log.segment.delete.delay.ms", Default: "60000", Validate: isLong(0)},
		{Name: "flush.messages", BrokerName: "log.flush.interval.messages", Default: "9223372036854775807", Validate: isLong(1)},
		{Name: "flush.ms", BrokerName: "log.flush.interval.ms", Default: "9223372036854775807", Validate: isLong(0)},
		{Name: "index.interval.bytes", BrokerName: "log.index.interval.bytes", Default: "4096", Validate: isLong(0)},
		{Name: "max.message.bytes", BrokerName: "message.max.bytes", Default: "1048588", Validate: isLong(0)},
		{Name: "message.timestamp.type", BrokerName: "log.message.timestamp.type", Default: "CreateTime", Validate: oneOf("CreateTime")},
		{Name: "min.insync.replicas", BrokerName: "min.insync.replicas", Default: "1", Validate: isLong(1)},
		{Name: "retention.bytes", BrokerName: "log.retention.bytes", Default: "-1", Validate: isLong(-1)},
		{Name: "retention.ms", BrokerName: "log.retention.ms", Default: "604800000", Validate: isLong(-1)},
		{Name: "segment.bytes", BrokerName: "log.segment.bytes", Default: "1073741824", Validate: isLong(14)},
		{Name: "segment.ms", BrokerName: "log.roll.ms", Default: "604800000", Validate: isLong(1)},
		{Name: "unclean.leader.election.enable", BrokerName: "unclean.leader.election.enable", Default: "false", Validate: oneOf("true", "false")},
	}
	m := make(map[string]ConfigSpec, len(list))
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}()

// SpecNames lists the known config names in order.
func SpecNames() []string {
	names := make([]string, 0, len(Specs))
	for n := range Specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ValidateConfigs checks overrides as CreateTopics / AlterConfigs do.
func ValidateConfigs(configs map[string]string) error {
	for k, v := range configs {
		spec, ok := Specs[k]
		if !ok {
			return fmt.Errorf("unknown topic config name: %s", k)
		}
		if err := spec.Validate(v); err != nil {
			return fmt.Errorf("invalid value for %s: %w", k, err)
		}
	}
	return nil
}

// Resolved is a topic's effective configuration.
type Resolved struct {
	Log             storage.Config
	MaxMessageBytes int32
}

// Resolve layers topic overrides over broker defaults.
func Resolve(overrides, brokerDefaults map[string]string) Resolved {
	get := func(name string) int64 {
		for _, m := range []map[string]string{overrides, brokerDefaults} {
			if v, ok := m[name]; ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					return n
				}
			}
		}
		n, _ := strconv.ParseInt(Specs[name].Default, 10, 64)
		return n
	}
	r := Resolved{Log: storage.DefaultConfig()}
	r.Log.SegmentBytes = get("segment.bytes")
	r.Log.SegmentMs = get("segment.ms")
	r.Log.RetentionMs = get("retention.ms")
	r.Log.RetentionBytes = get("retention.bytes")
	r.Log.IndexIntervalBytes = get("index.interval.bytes")
	r.Log.FileDeleteDelay = time.Duration(get("file.delete.delay.ms")) * time.Millisecond
	r.MaxMessageBytes = int32(min(get("max.message.bytes"), 1<<31-1))
	return r
}
