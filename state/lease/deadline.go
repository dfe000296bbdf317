// Package lease is the clock a broker acknowledges by: it may act as an
// owner only while its etcd lease is certainly alive. etcd expires a lease
// TTL after the leader *received* the last keep-alive; that moment is
// unknown to the broker, but it is never earlier than the keep-alive's
// *send* time plus the TTL. So the deadline is measured from the send
// time, minus a margin for clock-rate drift and for the work (an append,
// an fsync) that must finish before it. Pure and clock-injected.
package lease

import "time"

// Deadline tracks when this broker's lease could first expire.
type Deadline struct {
	margin time.Duration
	until  time.Time // zero: no successful keep-alive yet
}

// New returns a deadline with the given safety margin and no renewal yet
// (so not alive).
func New(margin time.Duration) *Deadline { return &Deadline{margin: margin} }

// DefaultMargin is the margin for a TTL: a sixth of it, at least 100 ms.
func DefaultMargin(ttl time.Duration) time.Duration {
	m := ttl / 6
	if m < 100*time.Millisecond {
		m = 100 * time.Millisecond
	}
	return m
}

// Renewed records a successful grant or keep-alive that was sent at
// sentAt and answered with ttl (the lease's full TTL from then). The
// deadline only moves forward: an answer to an older request that arrives
// late cannot pull it back, and cannot push it past what that request
// proves either.
func (d *Deadline) Renewed(sentAt time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return // the lease is gone (etcd answers TTL ≤ 0 for an expired lease)
	}
	until := sentAt.Add(ttl - d.margin)
	if until.After(d.until) {
		d.until = until
	}
}

// Lost forgets every renewal: the lease is known to be gone.
func (d *Deadline) Lost() { d.until = time.Time{} }

// Until is the instant after which this broker must neither append nor
// acknowledge; zero when there never was a renewal.
func (d *Deadline) Until() time.Time { return d.until }

// Alive reports whether now is strictly before the deadline.
func (d *Deadline) Alive(now time.Time) bool {
	return !d.until.IsZero() && now.Before(d.until)
}

// Remaining is how long is left at now (≤ 0 when not alive).
func (d *Deadline) Remaining(now time.Time) time.Duration {
	if d.until.IsZero() {
		return 0
	}
	return d.until.Sub(now)
}
