// Package groupconfig is Apache 4.2's per-group configs (GroupConfig,
// the GROUP config resource, type 32): their names, types, defaults,
// validation and the effective values a group runs with. A group's
// configs are set with IncrementalAlterConfigs or AlterConfigs before or
// after the group exists; those not set take the broker's value
// (Apache's GroupCoordinatorConfig.extractGroupConfigMap).
//
// Validation is GroupConfig.validate: the names must be group configs,
// every value must parse and pass its ConfigDef check, the merged
// configs (broker defaults under the group's) must lie within the
// broker's bounds (Apache's group.*.min/max.* broker configs, at their
// defaults here, widened to include the broker's own value so that a
// broker run with short timeouts accepts them), and each session
// timeout must exceed its heartbeat interval. Every failure is
// INVALID_CONFIG in Apache (InvalidConfigurationException).
//
// Pure: no I/O.
package groupconfig

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"kaas/state/topics"
)

// The group config names.
const (
	ConsumerSessionTimeout        = "consumer.session.timeout.ms"
	ConsumerHeartbeatInterval     = "consumer.heartbeat.interval.ms"
	ShareSessionTimeout           = "share.session.timeout.ms"
	ShareHeartbeatInterval        = "share.heartbeat.interval.ms"
	ShareRecordLockDuration       = "share.record.lock.duration.ms"
	ShareDeliveryCountLimit       = "share.delivery.count.limit"
	SharePartitionMaxRecordLocks  = "share.partition.max.record.locks"
	ShareAutoOffsetReset          = "share.auto.offset.reset"
	ShareIsolationLevel           = "share.isolation.level"
	ShareRenewAcknowledgeEnable   = "share.renew.acknowledge.enable"
	StreamsSessionTimeout         = "streams.session.timeout.ms"
	StreamsHeartbeatInterval      = "streams.heartbeat.interval.ms"
	StreamsNumStandbyReplicas     = "streams.num.standby.replicas"
	StreamsInitialRebalanceDelay  = "streams.initial.rebalance.delay.ms"
	defaultShareAutoOffsetReset   = "latest"
	defaultShareIsolationLevel    = "read_uncommitted"
	defaultShareRenewAcknowledge  = "true"
	defaultStreamsStandbyReplicas = "0"
)

// Spec is one group config.
type Spec struct {
	Name string
	Type topics.ConfigType
	// AtLeast is the ConfigDef range check of an INT config.
	AtLeast int64
	// Default is Apache's default when the broker does not supply one.
	Default string
	// Bounds are the broker's limits for the value (Apache's
	// group.*.min.* / group.*.max.* defaults); zero when none.
	Min, Max int64
	// MinName and MaxName are the broker configs naming those limits,
	// for the error messages.
	MinName, MaxName string
	Doc              string
}

// Specs are Apache 4.2's group configs in GroupConfig's order.
var Specs = []Spec{
	{Name: ConsumerSessionTimeout, Type: topics.TypeInt, AtLeast: 1, Default: "45000", Min: 45000, Max: 60000,
		MinName: "group.consumer.min.session.timeout.ms", MaxName: "group.consumer.max.session.timeout.ms",
		Doc: "The timeout to detect client failures when using the consumer group protocol."},
	{Name: ConsumerHeartbeatInterval, Type: topics.TypeInt, AtLeast: 1, Default: "5000", Min: 5000, Max: 15000,
		MinName: "group.consumer.min.heartbeat.interval.ms", MaxName: "group.consumer.max.heartbeat.interval.ms",
		Doc: "The heartbeat interval given to the members of a consumer group."},
	{Name: ShareSessionTimeout, Type: topics.TypeInt, AtLeast: 1, Default: "45000", Min: 45000, Max: 60000,
		MinName: "group.share.min.session.timeout.ms", MaxName: "group.share.max.session.timeout.ms",
		Doc: "The timeout to detect client failures when using the share group protocol."},
	{Name: ShareHeartbeatInterval, Type: topics.TypeInt, AtLeast: 1, Default: "5000", Min: 5000, Max: 15000,
		MinName: "group.share.min.heartbeat.interval.ms", MaxName: "group.share.max.heartbeat.interval.ms",
		Doc: "The heartbeat interval given to the members of a share group."},
	{Name: ShareRecordLockDuration, Type: topics.TypeInt, AtLeast: 1000, Default: "30000", Min: 15000, Max: 60000,
		MinName: "group.share.min.record.lock.duration.ms", MaxName: "group.share.max.record.lock.duration.ms",
		Doc: "The record acquisition lock duration in milliseconds for share groups."},
	{Name: ShareDeliveryCountLimit, Type: topics.TypeInt, AtLeast: 2, Default: "5", Min: 2, Max: 10,
		MinName: "group.share.min.delivery.count.limit", MaxName: "group.share.max.delivery.count.limit",
		Doc: "The maximum number of delivery attempts for a record delivered to a share group."},
	{Name: SharePartitionMaxRecordLocks, Type: topics.TypeInt, AtLeast: 100, Default: "2000", Min: 100, Max: 10000,
		MinName: "group.share.min.partition.max.record.locks", MaxName: "group.share.max.partition.max.record.locks",
		Doc: "Share-group record lock limit per share-partition."},
	{Name: ShareAutoOffsetReset, Type: topics.TypeString, Default: defaultShareAutoOffsetReset,
		Doc: "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<ISO-8601 duration> (PnDTnHnMn.nS) before now."},
	{Name: ShareIsolationLevel, Type: topics.TypeString, Default: defaultShareIsolationLevel,
		Doc: "Controls how to read records written transactionally: read_committed delivers only committed transactional records, read_uncommitted every record."},
	{Name: ShareRenewAcknowledgeEnable, Type: topics.TypeBoolean, Default: defaultShareRenewAcknowledge,
		Doc: "Whether the renew acknowledge type is enabled for the share group."},
	{Name: StreamsSessionTimeout, Type: topics.TypeInt, AtLeast: 1, Default: "45000", Min: 45000, Max: 60000,
		MinName: "group.streams.min.session.timeout.ms", MaxName: "group.streams.max.session.timeout.ms",
		Doc: "The timeout to detect client failures when using the streams group protocol (kaas has no streams groups: stored only)."},
	{Name: StreamsHeartbeatInterval, Type: topics.TypeInt, AtLeast: 1, Default: "5000", Min: 5000, Max: 15000,
		MinName: "group.streams.min.heartbeat.interval.ms", MaxName: "group.streams.max.heartbeat.interval.ms",
		Doc: "The heartbeat interval given to the members of a streams group (stored only)."},
	{Name: StreamsNumStandbyReplicas, Type: topics.TypeInt, AtLeast: 0, Default: defaultStreamsStandbyReplicas, Max: 2,
		MaxName: "group.streams.max.standby.replicas", Doc: "The number of standby replicas for each task (stored only)."},
	{Name: StreamsInitialRebalanceDelay, Type: topics.TypeInt, AtLeast: 0, Default: "3000",
		Doc: "The amount of time the group coordinator will wait for more streams clients to join a new group before performing the first rebalance (stored only)."},
}

var byName = func() map[string]*Spec {
	m := make(map[string]*Spec, len(Specs))
	for i := range Specs {
		m[Specs[i].Name] = &Specs[i]
	}
	return m
}()

// Lookup returns a group config's spec.
func Lookup(name string) (Spec, bool) {
	s, ok := byName[name]
	if !ok {
		return Spec{}, false
	}
	return *s, true
}

// Names lists the group configs sorted, as DescribeConfigs lists them.
func Names() []string {
	out := make([]string, 0, len(Specs))
	for _, s := range Specs {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// Defaults are the values a group runs with when it sets none: the
// broker's (overrides: group config name → the broker's value, e.g.
// share.session.timeout.ms from group.share.session.timeout.ms), else
// Apache's default. A broker value outside a bound widens that bound.
type Defaults struct {
	values   map[string]string
	min, max map[string]int64
}

// NewDefaults takes the broker's values.
func NewDefaults(broker map[string]string) Defaults {
	d := Defaults{values: map[string]string{}, min: map[string]int64{}, max: map[string]int64{}}
	for _, s := range Specs {
		v, ok := broker[s.Name]
		if !ok {
			v = s.Default
		}
		d.values[s.Name] = v
		d.min[s.Name], d.max[s.Name] = s.Min, s.Max
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && s.Type == topics.TypeInt {
			if s.MinName != "" && n < s.Min {
				d.min[s.Name] = n
			}
			if s.MaxName != "" && n > s.Max {
				d.max[s.Name] = n
			}
		}
	}
	return d
}

// Value is a config's default.
func (d Defaults) Value(name string) string { return d.values[name] }

// Validate checks a group's whole set of configs (name → value) as
// GroupConfig.validate, merged over the defaults.
func (d Defaults) Validate(values map[string]string) error {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, ok := byName[n]; !ok {
			return fmt.Errorf("Unknown group config name: %s", n)
		}
	}
	merged := d.Effective(values)
	ints := map[string]int64{}
	for _, s := range Specs {
		v := merged[s.Name]
		if err := s.check(v); err != nil {
			return fmt.Errorf("Invalid value %s for configuration %s: %w", v, s.Name, err)
		}
		if s.Type == topics.TypeInt {
			ints[s.Name], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	for _, s := range Specs {
		n := ints[s.Name]
		if s.MinName != "" && n < d.min[s.Name] {
			return fmt.Errorf("%s must be greater than or equal to %s", s.Name, s.MinName)
		}
		if s.MaxName != "" && n > d.max[s.Name] {
			return fmt.Errorf("%s must be less than or equal to %s", s.Name, s.MaxName)
		}
	}
	for _, p := range [][2]string{{ConsumerSessionTimeout, ConsumerHeartbeatInterval}, {ShareSessionTimeout, ShareHeartbeatInterval},
		{StreamsSessionTimeout, StreamsHeartbeatInterval}} {
		if ints[p[0]] <= ints[p[1]] {
			return fmt.Errorf("%s must be greater than %s", p[0], p[1])
		}
	}
	return nil
}

// Effective is every config's value for a group that set values: its
// own over the defaults, canonical (trimmed, as ConfigDef parses them).
func (d Defaults) Effective(values map[string]string) map[string]string {
	out := make(map[string]string, len(Specs))
	for _, s := range Specs {
		v, ok := values[s.Name]
		if !ok {
			v = d.values[s.Name]
		}
		out[s.Name] = strings.TrimSpace(v)
	}
	return out
}

// Int is an INT config's effective value (0 if it does not parse, which
// Validate refuses).
func Int(effective map[string]string, name string) int64 {
	n, _ := strconv.ParseInt(effective[name], 10, 64)
	return n
}

// Millis is a *.ms config's effective value.
func Millis(effective map[string]string, name string) time.Duration {
	return time.Duration(Int(effective, name)) * time.Millisecond
}

func (s Spec) check(v string) error {
	switch s.Type {
	case topics.TypeInt:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("Not a number of type INT")
		}
		if n < s.AtLeast {
			return fmt.Errorf("Value must be at least %d", s.AtLeast)
		}
	case topics.TypeBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return fmt.Errorf("Expected value to be either true or false")
		}
	}
	switch s.Name {
	case ShareAutoOffsetReset:
		if _, _, err := ParseAutoOffsetReset(v); err != nil {
			return err
		}
	case ShareIsolationLevel:
		if v != "read_committed" && v != "read_uncommitted" {
			return fmt.Errorf("String must be one of: read_committed, read_uncommitted")
		}
	}
	return nil
}

// ParseAutoOffsetReset parses share.auto.offset.reset as Apache's
// ShareGroupAutoOffsetResetStrategy: earliest, latest (any case), or
// by_duration:<ISO-8601 duration>, not negative — the share-partition
// then starts at the first record at most that long before now.
func ParseAutoOffsetReset(v string) (strategy string, by time.Duration, err error) {
	switch l := strings.ToLower(strings.TrimSpace(v)); {
	case l == "earliest" || l == "latest":
		return l, 0, nil
	case strings.HasPrefix(l, "by_duration:"):
		d, err := parseISODuration(strings.TrimSpace(v[len("by_duration:"):]))
		if err != nil {
			return "", 0, fmt.Errorf("Invalid duration for by_duration: %w", err)
		}
		return "by_duration", d, nil
	}
	return "", 0, fmt.Errorf("Invalid value `%s` for configuration %s. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.", v, ShareAutoOffsetReset)
}

var isoDuration = regexp.MustCompile(`^[Pp](?:(\d+)[Dd])?(?:[Tt](?:(\d+)[Hh])?(?:(\d+)[Mm])?(?:(\d+)(?:[.,](\d{1,9}))?[Ss])?)?$`)

// parseISODuration is java.time.Duration.parse for the non-negative
// durations Apache accepts here (PnDTnHnMn.nS).
func parseISODuration(s string) (time.Duration, error) {
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("negative duration is not allowed")
	}
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		return 0, fmt.Errorf("text cannot be parsed to a Duration: %s", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil || n > int64(1<<62)/int64(unit) {
			return 0, fmt.Errorf("duration out of range: %s", s)
		}
		d += time.Duration(n) * unit
	}
	if frac := m[5]; frac != "" {
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		d += time.Duration(ns)
	}
	return d, nil
}
