package auth

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/net/wire"
	"kaas/state/acl"
	"kaas/state/sasl"
)

// Stage is where an unauthenticated connection on a SASL listener
// stands, as Apache's SaslServerAuthenticator states.
type Stage int

const (
	StageInitial      Stage = iota // ApiVersions or SaslHandshake may come
	StageHandshake                 // after ApiVersions: only SaslHandshake
	StageAuthenticate              // after SaslHandshake: only tokens
	StageFailed                    // closing
)

// State is a connection's SASL state (kept in its session).
type State struct {
	Stage Stage
	Conv  *sasl.Conversation
	Peer  bool // a KAAS-PEER exchange (peer.go)
	// Reauth is set while an authenticated connection re-authenticates
	// (KIP-368); LastReauth is when the last re-authentication began.
	Reauth     *Reauthentication
	LastReauth time.Time
}

// With runs fn on the connection's SASL state.
func With(c *server.Call, fn func(st *State)) {
	c.Session().AuthState(func(v any) any {
		st, _ := v.(*State)
		if st == nil {
			st = &State{}
		}
		fn(st)
		return st
	})
}

// PreAuth admits a request on a connection that has not authenticated
// yet (a SASL listener). ApiVersions may come first, then SaslHandshake,
// then the SASL tokens; anything else closes the connection after the
// failed-authentication delay, as Apache's IllegalSaslStateException.
func (sec *Security) PreAuth(c *server.Call) bool {
	ok := true
	With(c, func(st *State) {
		switch {
		case c.Key == wire.ApiVersionsKey && st.Stage == StageInitial:
			st.Stage = StageHandshake
		case c.Key == KeySASLHandshake && st.Stage <= StageHandshake:
		case c.Key == KeySASLAuthenticate && st.Stage == StageAuthenticate:
		default:
			ok = false
			st.Stage = StageFailed
		}
	})
	if !ok {
		sec.cfg.Logger.Warn("closing connection: request not allowed before SASL authentication",
			"remote", c.Remote, "listener", c.Session().Listener, "api", kmsg.NameForKey(c.Key))
		sec.FailAuth(c, "", nil)
	}
	return ok
}

// The SASL API keys.
const (
	KeySASLHandshake    = 17
	KeySASLAuthenticate = 36
)

// Mechanisms are the SASL mechanisms a listener offers: PLAIN sends the
// password itself, so it needs TLS unless --sasl-plain-allow-insecure.
func (sec *Security) Mechanisms(s *server.Session) []string {
	var out []string
	for _, m := range sec.sasl.Enabled() {
		if m == sasl.Plain && !s.Protocol.TLS() && !sec.cfg.SASLPlainAllowInsecure {
			continue
		}
		out = append(out, m)
	}
	return out
}

// Offers reports whether s's listener offers mechanism.
func (sec *Security) Offers(s *server.Session, mechanism string) bool {
	return slices.Contains(sec.Mechanisms(s), mechanism)
}

// FailAuth ends an authentication attempt the way Apache does: after
// --failed-auth-delay (so a client cannot hammer the broker, and the time
// a failure takes tells nothing), answer resp if any and close.
func (sec *Security) FailAuth(c *server.Call, mechanism string, resp kmsg.Response) {
	s := c.Session()
	var reauth *Reauthentication
	With(c, func(st *State) { reauth = st.Reauth })
	switch {
	case reauth != nil:
		sec.cfg.Metrics.Reauthentications.WithLabelValues(s.Listener, reauth.Mechanism, "failed").Inc()
	case mechanism != "":
		sec.cfg.Metrics.Authentications.WithLabelValues(s.Listener, mechanism, "failed").Inc()
	}
	release := c.Hold()
	time.AfterFunc(sec.cfg.FailedAuthDelay, func() {
		defer release()
		if resp == nil {
			c.Close()
			return
		}
		c.ReplyAndClose(resp)
	})
}

// Authenticated completes a SASL exchange (or a re-authentication) and
// returns the session's lifetime, 0 when it has none.
func (sec *Security) Authenticated(c *server.Call, mechanism, user string) time.Duration {
	s := c.Session()
	var reauth *Reauthentication
	With(c, func(st *State) { reauth, st.Reauth = st.Reauth, nil })
	lifetime := max(sec.cfg.ConnectionsMaxReauth, 0)
	if mechanism == PeerMechanism {
		lifetime = 0 // the cluster's peer secret, not a user's credential: nothing to re-check
	}
	var expires time.Time
	if lifetime > 0 {
		expires = time.Now().Add(lifetime)
	}
	s.SetAuthenticated(acl.UserPrincipal(user), mechanism, expires, reauth != nil)
	if reauth != nil {
		sec.cfg.Metrics.Reauthentications.WithLabelValues(s.Listener, mechanism, "ok").Inc()
		sec.cfg.Logger.Debug("re-authenticated", "remote", c.Remote, "listener", s.Listener, "mechanism", mechanism,
			"principal", s.Principal(), "took", time.Since(reauth.Began), "session_lifetime", lifetime)
		return lifetime
	}
	sec.cfg.Metrics.Authentications.WithLabelValues(s.Listener, mechanism, "ok").Inc()
	sec.cfg.Logger.Debug("authenticated", "remote", c.Remote, "listener", s.Listener, "mechanism", mechanism, "principal", s.Principal(),
		"session_lifetime", lifetime)
	return lifetime
}
