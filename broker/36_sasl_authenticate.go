package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sasl"
)

func init() {
	register(api{key: auth.KeySASLAuthenticate, min: 0, max: 2, blocking: true, serve: serveSASLAuthenticate, fail: failSASLAuthenticate})
}

// serveSASLAuthenticate serves SaslAuthenticate (key 36), versions 0–2.
//
// Carries one SASL token of the exchange SaslHandshake started (bare
// tokens after a v0 handshake arrive here too, marked Raw). A failed
// exchange — wrong password, unknown user, malformed token — is answered
// SASL_AUTHENTICATION_FAILED with Apache's generic message (nothing says
// whether the user exists) after --failed-auth-delay, and the connection
// closes. On success the connection's principal becomes User:<name>,
// and SessionLifetimeMs (v1+) is --connections-max-reauth in ms (0: the
// session never ends). A KIP-368 re-authentication
// (broker/auth/reauth.go) must prove the session's principal: another
// user is
// SASL_AUTHENTICATION_FAILED and the connection closes. On a connection
// that is already authenticated, or a listener without SASL:
// ILLEGAL_SASL_STATE.
func serveSASLAuthenticate(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	s := c.Session()
	var peer bool
	auth.With(c, func(st *auth.State) { peer = st.Peer })
	if peer {
		return b.sec.PeerAuthenticate(c, req, resp)
	}
	if s.Authenticated() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received after successful authentication")
		return resp
	}
	var conv *sasl.Conversation
	var reauth *auth.Reauthentication
	auth.With(c, func(st *auth.State) { conv, reauth = st.Conv, st.Reauth })
	reply, done, err := conv.Step(req.SASLAuthBytes)
	if err == nil && done {
		if msg := auth.ReauthMismatch(reauth, acl.UserPrincipal(conv.User())); msg != "" {
			err = &sasl.Failure{Msg: msg}
		}
	}
	if err != nil {
		var f *sasl.Failure
		msg := err.Error()
		if errors.As(err, &f) {
			msg = f.Msg
		}
		b.log.Info("SASL authentication failed", "remote", c.Remote, "listener", s.Listener, "mechanism", conv.Mechanism(), "reason", msg)
		auth.With(c, func(st *auth.State) { st.Stage = auth.StageFailed })
		s.SetRawTokens(false)
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		b.sec.FailAuth(c, conv.Mechanism(), resp)
		return nil
	}
	resp.SASLAuthBytes = reply
	if done {
		s.SetRawTokens(false)
		resp.SessionLifetimeMillis = b.sec.Authenticated(c, conv.Mechanism(), conv.User()).Milliseconds()
	}
	return resp
}

func failSASLAuthenticate(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = code
	return resp
}
