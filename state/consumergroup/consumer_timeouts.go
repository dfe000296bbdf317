package consumergroup

import "time"

// ConsumerTimeouts are the session timeout and heartbeat interval a
// KIP-848 consumer group runs with: its own consumer.session.timeout.ms /
// consumer.heartbeat.interval.ms (GROUP configs) or else the broker's
// group.consumer.* values. Apache's GroupMetadataManager reads them from
// the group's config on every heartbeat (consumerGroupSessionTimeoutMs,
// consumerGroupHeartbeatIntervalMs), so a change reaches each member at
// its next heartbeat: the interval in that answer, the session timer
// restarted with the new timeout. Zero fields keep the current value.
type ConsumerTimeouts struct {
	Session           time.Duration
	HeartbeatInterval time.Duration
}

// WithConsumerTimeouts is c running with t's non-zero fields.
func (c Config) WithConsumerTimeouts(t ConsumerTimeouts) Config {
	if t.Session > 0 {
		c.ConsumerSessionTimeout = t.Session
	}
	if t.HeartbeatInterval > 0 {
		c.ConsumerHeartbeatInterval = t.HeartbeatInterval
	}
	return c
}

// SetConsumerTimeouts makes the group run with t from now on (the owner
// calls it before each consumer heartbeat with the group's current
// configs); timers already running keep their deadline, as Apache's.
func (g *Group) SetConsumerTimeouts(t ConsumerTimeouts) { g.cfg = g.cfg.WithConsumerTimeouts(t) }
