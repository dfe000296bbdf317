package consumergroup

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Config is the group coordinator's broker configuration.
type Config struct {
	// MinSessionTimeout and MaxSessionTimeout bound a member's session
	// timeout (group.min/max.session.timeout.ms, 6 s and 30 min).
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration
	// InitialRebalanceDelay holds the first rebalance of an empty group
	// open for more members (group.initial.rebalance.delay.ms, 3 s).
	InitialRebalanceDelay time.Duration
	// MaxSize caps the members of a group (group.max.size; 0: no cap).
	MaxSize int
	// NewMemberJoinTimeout expires a new member whose JoinGroup is still
	// parked (Apache's fixed 5 minutes).
	NewMemberJoinTimeout time.Duration
	// MaxMetadataSize bounds an offset's metadata string
	// (offset.metadata.max.bytes, 4096).
	MaxMetadataSize int
	// OffsetsRetention is how long offsets outlive an empty group
	// (offsets.retention.minutes, 7 days).
	OffsetsRetention time.Duration

	// KIP-848 consumer groups.

	// ConsumerHeartbeatInterval is the heartbeat interval given to
	// members (group.consumer.heartbeat.interval.ms, 5 s).
	ConsumerHeartbeatInterval time.Duration
	// ConsumerSessionTimeout fences a member that stops heartbeating
	// (group.consumer.session.timeout.ms, 45 s).
	ConsumerSessionTimeout time.Duration
	// ConsumerAssignors are the server-side assignors members may ask
	// for, the first the default (group.consumer.assignors: uniform,
	// range).
	ConsumerAssignors []string
	// ConsumerMaxSize caps a consumer group's members
	// (group.consumer.max.size; 0: no cap).
	ConsumerMaxSize int
	// MigrationPolicy says which non-empty groups convert between the
	// classic and the consumer protocol (group.consumer.migration.policy,
	// bidirectional).
	MigrationPolicy MigrationPolicy
}

// MigrationPolicy is group.consumer.migration.policy.
type MigrationPolicy string

// The migration policies, as Apache names them.
const (
	MigrationBidirectional MigrationPolicy = "bidirectional"
	MigrationUpgrade       MigrationPolicy = "upgrade"
	MigrationDowngrade     MigrationPolicy = "downgrade"
	MigrationDisabled      MigrationPolicy = "disabled"
)

// ParseMigrationPolicy reads a policy case-insensitively; anything else is
// an error (Apache's config validation refuses it).
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	switch p := MigrationPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return p, nil
	}
	return "", fmt.Errorf("group.consumer.migration.policy %q: must be one of bidirectional, upgrade, downgrade, disabled", s)
}

// upgradeEnabled: a non-empty classic group may become a consumer group.
func (p MigrationPolicy) upgradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationUpgrade
}

// downgradeEnabled: a consumer group left with only classic members may
// become a classic group.
func (p MigrationPolicy) downgradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// DefaultConfig is Apache 3.7's defaults for classic groups and 4.0's for
// consumer groups.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second,
		NewMemberJoinTimeout:  5 * time.Minute,
		MaxMetadataSize:       4096,
		OffsetsRetention:      7 * 24 * time.Hour,

		ConsumerHeartbeatInterval: 5 * time.Second,
		ConsumerSessionTimeout:    45 * time.Second,
		ConsumerAssignors:         []string{UniformAssignor, RangeAssignor},
		MigrationPolicy:           MigrationBidirectional,
	}
}

// Normalized fills zero fields that have no meaningful zero value with the
// defaults (a zero initial delay or minimum session timeout is kept).
func (c Config) Normalized() Config {
	d := DefaultConfig()
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = d.MaxSessionTimeout
	}
	if c.MaxSize <= 0 {
		c.MaxSize = math.MaxInt32
	}
	if c.NewMemberJoinTimeout <= 0 {
		c.NewMemberJoinTimeout = d.NewMemberJoinTimeout
	}
	if c.MaxMetadataSize <= 0 {
		c.MaxMetadataSize = d.MaxMetadataSize
	}
	if c.OffsetsRetention <= 0 {
		c.OffsetsRetention = d.OffsetsRetention
	}
	if c.ConsumerHeartbeatInterval <= 0 {
		c.ConsumerHeartbeatInterval = d.ConsumerHeartbeatInterval
	}
	if c.ConsumerSessionTimeout <= 0 {
		c.ConsumerSessionTimeout = d.ConsumerSessionTimeout
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = d.ConsumerAssignors
	}
	if c.ConsumerMaxSize <= 0 {
		c.ConsumerMaxSize = math.MaxInt32
	}
	if c.MigrationPolicy == "" {
		c.MigrationPolicy = d.MigrationPolicy
	}
	return c
}

// ValidSessionTimeout is JoinGroup's INVALID_SESSION_TIMEOUT check, made
// before the group is looked up or created.
func (c Config) ValidSessionTimeout(ms int32) bool {
	d := time.Duration(ms) * time.Millisecond
	return d >= c.MinSessionTimeout && d <= c.MaxSessionTimeout
}
