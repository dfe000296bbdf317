package sharegroup

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
)

// shareSessionLimitReached is SHARE_SESSION_LIMIT_REACHED (133), which
// kerr v1.15 does not name yet.
const shareSessionLimitReached int16 = 133

// SessionRequest is what a ShareFetch or ShareAcknowledge says about its
// share session.
type SessionRequest struct {
	Group, Member string
	Epoch         int32
	// Add are the partitions the request names (added to the session),
	// Forget its forgotten ones (ShareFetch only).
	Add, Forget []model.TopicIDPartition
	// HasAcks: the request carries acknowledgements (not allowed when it
	// opens a session).
	HasAcks bool
	// Acknowledge: a ShareAcknowledge, which cannot open a session.
	Acknowledge bool
	// Owner is the connection the request came on (opaque, comparable):
	// Apache ties a share session to the connection that opened it.
	Owner any
}

// OpenSession is Apache's ShareSessionCache for one request: epoch 0
// opens a new session (replacing the member's old one; no
// acknowledgements allowed, INVALID_REQUEST), a positive epoch must be
// the session's (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH)
// and adds and forgets partitions, -1 is the last request of a session
// (see CloseSession). A successful request moves the session's epoch on.
// Records the member holds on forgotten partitions are released.
func (c *Coordinator) OpenSession(r SessionRequest, now time.Time) (*Session, int16) {
	g := c.groups[r.Group]
	switch {
	case r.Epoch == 0 && r.Acknowledge:
		return nil, kerr.InvalidShareSessionEpoch.Code
	case r.Epoch == 0:
		if r.HasAcks {
			return nil, kerr.InvalidRequest.Code
		}
		if g == nil {
			g = c.group(r.Group)
		}
		if g.sessions[r.Member] != nil {
			delete(g.sessions, r.Member)
			c.sessions--
		}
		if c.cfg.MaxSessions > 0 && c.sessions >= c.cfg.MaxSessions {
			return nil, shareSessionLimitReached
		}
		s := &Session{Epoch: 1, Partitions: map[model.TopicIDPartition]struct{}{}, owner: r.Owner}
		for _, tp := range r.Add {
			s.Partitions[tp] = struct{}{}
		}
		g.sessions[r.Member] = s
		c.sessions++
		return s, 0
	}
	if g == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	s := g.sessions[r.Member]
	switch {
	case s == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case r.Epoch == -1:
		return s, 0
	case r.Epoch != s.Epoch:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	for _, tp := range r.Add {
		s.Partitions[tp] = struct{}{}
	}
	for _, tp := range r.Forget {
		delete(s.Partitions, tp)
		if p := g.Partitions[tp]; p != nil {
			p.ReleaseMember(r.Member, now)
		}
	}
	s.Epoch++
	if s.Epoch <= 0 {
		s.Epoch = 1
	}
	return s, 0
}

// CloseSession ends a member's session (epoch -1, after its
// acknowledgements are applied) and releases what the member still holds
// on the session's partitions.
func (c *Coordinator) CloseSession(group, member string, now time.Time) {
	g := c.groups[group]
	if g == nil || g.sessions[member] == nil {
		return
	}
	s := g.sessions[member]
	delete(g.sessions, member)
	c.sessions--
	for tp := range s.Partitions {
		if p := g.Partitions[tp]; p != nil {
			p.ReleaseMember(member, now)
		}
	}
}

// ConnectionClosed ends the member's session if the closed connection
// opened it (Apache's ConnectionDisconnectListener), releasing what the
// member holds on its partitions. It reports whether it did.
func (c *Coordinator) ConnectionClosed(group, member string, owner any, now time.Time) bool {
	g := c.groups[group]
	if g == nil || g.sessions[member] == nil || g.sessions[member].owner != owner {
		return false
	}
	c.CloseSession(group, member, now)
	return true
}

// Sessions is how many share sessions are open.
func (c *Coordinator) Sessions() int { return c.sessions }
