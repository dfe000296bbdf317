package broker

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/net/wire"
	"kaas/state/acl"
	"kaas/state/sasl"
)

// saslStage is where an unauthenticated connection on a SASL listener
// stands, as Apache's SaslServerAuthenticator states.
type saslStage int

const (
	stageInitial      saslStage = iota // ApiVersions or SaslHandshake may come
	stageHandshake                     // after ApiVersions: only SaslHandshake
	stageAuthenticate                  // after SaslHandshake: only tokens
	stageFailed                        // closing
)

type saslState struct {
	stage saslStage
	conv  *sasl.Conversation
	peer  bool // a KAAS-PEER exchange (peer_auth.go)
	// reauth is set while an authenticated connection re-authenticates
	// (KIP-368); lastReauth is when the last re-authentication began.
	reauth     *reauthentication
	lastReauth time.Time
}

// withSASL runs fn on the connection's SASL state.
func withSASL(c *server.Call, fn func(st *saslState)) {
	c.Session().AuthState(func(v any) any {
		st, _ := v.(*saslState)
		if st == nil {
			st = &saslState{}
		}
		fn(st)
		return st
	})
}

// preAuth admits a request on a connection that has not authenticated
// yet (a SASL listener). ApiVersions may come first, then SaslHandshake,
// then the SASL tokens; anything else closes the connection after the
// failed-authentication delay, as Apache's IllegalSaslStateException.
func (b *Broker) preAuth(c *server.Call) bool {
	ok := true
	withSASL(c, func(st *saslState) {
		switch {
		case c.Key == wire.ApiVersionsKey && st.stage == stageInitial:
			st.stage = stageHandshake
		case c.Key == keySASLHandshake && st.stage <= stageHandshake:
		case c.Key == keySASLAuthenticate && st.stage == stageAuthenticate:
		default:
			ok = false
			st.stage = stageFailed
		}
	})
	if !ok {
		b.log.Warn("closing connection: request not allowed before SASL authentication",
			"remote", c.Remote, "listener", c.Session().Listener, "api", kmsg.NameForKey(c.Key))
		b.failAuth(c, "", nil)
	}
	return ok
}

const (
	keySASLHandshake    = 17
	keySASLAuthenticate = 36
)

// mechanisms are the SASL mechanisms a listener offers: PLAIN sends the
// password itself, so it needs TLS unless --sasl-plain-allow-insecure.
func (b *Broker) mechanisms(s *server.Session) []string {
	var out []string
	for _, m := range b.sec.sasl.Enabled() {
		if m == sasl.Plain && !s.Protocol.TLS() && !b.cfg.SASLPlainAllowInsecure {
			continue
		}
		out = append(out, m)
	}
	return out
}

func (b *Broker) offers(s *server.Session, mechanism string) bool {
	return slices.Contains(b.mechanisms(s), mechanism)
}

// failAuth ends an authentication attempt the way Apache does: after
// --failed-auth-delay (so a client cannot hammer the broker, and the time
// a failure takes tells nothing), answer resp if any and close.
func (b *Broker) failAuth(c *server.Call, mechanism string, resp kmsg.Response) {
	s := c.Session()
	var reauth *reauthentication
	withSASL(c, func(st *saslState) { reauth = st.reauth })
	switch {
	case reauth != nil:
		b.metrics.Reauthentications.WithLabelValues(s.Listener, reauth.mechanism, "failed").Inc()
	case mechanism != "":
		b.metrics.Authentications.WithLabelValues(s.Listener, mechanism, "failed").Inc()
	}
	release := c.Hold()
	time.AfterFunc(b.cfg.FailedAuthDelay, func() {
		defer release()
		if resp == nil {
			c.Close()
			return
		}
		c.ReplyAndClose(resp)
	})
}

// authenticated completes a SASL exchange (or a re-authentication) and
// returns the session's lifetime, 0 when it has none.
func (b *Broker) authenticated(c *server.Call, mechanism, user string) time.Duration {
	s := c.Session()
	var reauth *reauthentication
	withSASL(c, func(st *saslState) { reauth, st.reauth = st.reauth, nil })
	lifetime := max(b.cfg.ConnectionsMaxReauth, 0)
	if mechanism == peerMechanism {
		lifetime = 0 // the cluster's peer secret, not a user's credential: nothing to re-check
	}
	var expires time.Time
	if lifetime > 0 {
		expires = time.Now().Add(lifetime)
	}
	s.SetAuthenticated(acl.UserPrincipal(user), mechanism, expires, reauth != nil)
	if reauth != nil {
		b.metrics.Reauthentications.WithLabelValues(s.Listener, mechanism, "ok").Inc()
		b.log.Debug("re-authenticated", "remote", c.Remote, "listener", s.Listener, "mechanism", mechanism,
			"principal", s.Principal(), "took", time.Since(reauth.began), "session_lifetime", lifetime)
		return lifetime
	}
	b.metrics.Authentications.WithLabelValues(s.Listener, mechanism, "ok").Inc()
	b.log.Debug("authenticated", "remote", c.Remote, "listener", s.Listener, "mechanism", mechanism, "principal", s.Principal(),
		"session_lifetime", lifetime)
	return lifetime
}
