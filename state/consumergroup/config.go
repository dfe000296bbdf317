package consumergroup

import (
	"math"
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
}

// DefaultConfig is Apache 3.7's defaults.
func DefaultConfig() Config {
	return Config{
		MinSessionTimeout:     6 * time.Second,
		MaxSessionTimeout:     30 * time.Minute,
		InitialRebalanceDelay: 3 * time.Second,
		NewMemberJoinTimeout:  5 * time.Minute,
		MaxMetadataSize:       4096,
		OffsetsRetention:      7 * 24 * time.Hour,
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
	return c
}

// ValidSessionTimeout is JoinGroup's INVALID_SESSION_TIMEOUT check, made
// before the group is looked up or created.
func (c Config) ValidSessionTimeout(ms int32) bool {
	d := time.Duration(ms) * time.Millisecond
	return d >= c.MinSessionTimeout && d <= c.MaxSessionTimeout
}
