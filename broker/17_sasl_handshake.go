package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/net/server"
)

func init() {
	register(api{key: auth.KeySASLHandshake, min: 0, max: 1, serve: serveSASLHandshake, fail: failSASLHandshake})
}

// serveSASLHandshake serves SaslHandshake (key 17), versions 0–1.
//
// On a SASL listener before authentication: picks the mechanism for the
// exchange that follows (UNSUPPORTED_SASL_MECHANISM, with the list, and
// the connection closed after --failed-auth-delay, for one this listener
// does not offer — PLAIN needs TLS unless --sasl-plain-allow-insecure).
// v1 is followed by SaslAuthenticate requests; v0 by bare SASL tokens
// with no Kafka header (the connection reads them raw until the exchange
// ends). On an authenticated connection whose session expires
// (--connections-max-reauth) it begins a KIP-368 re-authentication (see
// broker/auth/reauth.go); one for another mechanism than the session's is
// answered, and the next token closes the connection. Anywhere else — a listener
// without SASL, or after authentication otherwise — ILLEGAL_SASL_STATE,
// as Apache's KafkaApis.
func serveSASLHandshake(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	s := c.Session()
	resp.SupportedMechanisms = b.sec.Mechanisms(s)
	if b.cluster != nil && req.Mechanism == auth.PeerMechanism {
		return b.sec.PeerHandshake(c, req, resp)
	}
	if s.Authenticated() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	if !b.sec.Offers(s, req.Mechanism) {
		b.log.Warn("SASL handshake for a mechanism this listener does not offer", "remote", c.Remote,
			"listener", s.Listener, "mechanism", req.Mechanism, "offered", resp.SupportedMechanisms)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		auth.With(c, func(st *auth.State) { st.Stage = auth.StageFailed })
		b.sec.FailAuth(c, "", resp)
		return nil
	}
	conv, err := b.sec.SASL().Start(req.Mechanism)
	if err != nil { // offered but not startable cannot happen; answer as unsupported
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		b.sec.FailAuth(c, "", resp)
		return nil
	}
	auth.With(c, func(st *auth.State) {
		st.Stage, st.Conv = auth.StageAuthenticate, conv
		if st.Reauth != nil && st.Reauth.Mechanism != req.Mechanism {
			b.log.Info("re-authentication with another mechanism than the session's: closing at the next token",
				"remote", c.Remote, "listener", s.Listener, "mechanism", req.Mechanism, "session_mechanism", st.Reauth.Mechanism)
			st.Stage, st.Conv = auth.StageFailed, nil
		}
	})
	if req.Version == 0 {
		s.SetRawTokens(true)
	}
	return resp
}

func failSASLHandshake(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = code
	return resp
}
