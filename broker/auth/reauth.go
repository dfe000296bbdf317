package auth

import (
	"fmt"
	"strings"
	"time"

	"kaas/net/server"
)

// KIP-368 re-authentication. With --connections-max-reauth (Apache's
// connections.max.reauth.ms) a SASL session lasts that long: the
// successful SaslAuthenticate (v1+) tells the client so in
// session_lifetime_ms, and the client re-authenticates on the same
// connection — SaslHandshake, then the SaslAuthenticate exchange, with
// the same mechanism and as the same principal — before it ends. A
// connection whose session ended sends any other request, it is closed
// without an answer (what Apache does, also to clients too old to
// re-authenticate: they reconnect). A user deleted or given a new
// password meanwhile therefore loses its open connections within one
// session lifetime. As Apache's SocketServer and SaslServerAuthenticator:
//
//   - a SaslHandshake on an authenticated connection begins a
//     re-authentication only when sessions expire and the previous one
//     began at least a second ago; otherwise it is served as usual
//     (ILLEGAL_SASL_STATE, the connection lives);
//   - while re-authenticating, only the SASL exchange may come (anything
//     else closes the connection); requests already dispatched run as
//     the principal they were dispatched as;
//   - another mechanism than the session's: the handshake is answered,
//     the next token closes the connection without an answer;
//   - a different user: SASL_AUTHENTICATION_FAILED ("Cannot change
//     principals during re-authentication ...") and the connection
//     closes; a wrong password fails as a first authentication does.
//
// Failures close after --failed-auth-delay, as first authentications.

// Reauthentication is a re-authentication under way.
type Reauthentication struct {
	Mechanism string // the session's: the new exchange must use it
	Principal string // the session's: the new exchange must prove it
	Began     time.Time
}

// minReauthInterval is Apache's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS.
const minReauthInterval = time.Second

// SessionLive runs before every request of an authenticated connection
// whose SASL session expires: a SaslHandshake may begin a
// re-authentication (the connection then authenticates again and the
// caller's pre-authentication checks apply); any request once the
// session ended closes the connection.
func (sec *Security) SessionLive(c *server.Call) bool {
	s := c.Session()
	expires := s.Expires()
	if expires.IsZero() {
		return true
	}
	now := time.Now()
	if c.Key == KeySASLHandshake && sec.beginReauth(c, now) {
		return true
	}
	if now.Before(expires) {
		return true
	}
	sec.cfg.Metrics.ExpiredSessions.WithLabelValues(s.Listener).Inc()
	sec.cfg.Logger.Info("closing connection: its SASL session ended without re-authentication (connections.max.reauth.ms)",
		"remote", c.Remote, "listener", s.Listener, "principal", s.Principal(), "expired", expires, "api", c.Key)
	c.Close()
	return false
}

// beginReauth turns an authenticated connection back to authenticating,
// unless its last re-authentication began less than a second ago.
func (sec *Security) beginReauth(c *server.Call, now time.Time) bool {
	s := c.Session()
	ok := false
	With(c, func(st *State) {
		if !st.LastReauth.IsZero() && now.Sub(st.LastReauth) < minReauthInterval {
			return
		}
		ok = true
		st.LastReauth = now
		st.Stage, st.Conv = StageHandshake, nil
		st.Reauth = &Reauthentication{Mechanism: s.Mechanism(), Principal: s.Principal(), Began: now}
	})
	if ok {
		s.BeginReauthentication()
		sec.cfg.Logger.Debug("re-authentication begins", "remote", c.Remote, "listener", s.Listener, "principal", s.Principal())
	}
	return ok
}

// ReauthMismatch is Apache's wording for a re-authentication that proved
// another principal than the session's; "" when it did not.
func ReauthMismatch(r *Reauthentication, principal string) string {
	if r == nil || r.Principal == principal {
		return ""
	}
	dotted := func(p string) string { return strings.Replace(p, ":", ".", 1) }
	return fmt.Sprintf("Cannot change principals during re-authentication from %s: %s", dotted(r.Principal), dotted(principal))
}
