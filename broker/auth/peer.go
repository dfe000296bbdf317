package auth

// How cluster brokers tell each other from clients. WriteTxnMarkers and
// AddPartitionsToTxn v4 come only from brokers (as Apache: a principal
// with CLUSTER_ACTION), never from a client id or a source address that
// claims to be one. A cluster broker authenticates to its peers with
// SASL on the ordinary listener, mechanism KAAS-PEER, whose single token
// is the cluster's peer secret (coord.Session.PeerSecret, created once in
// etcd). The connection then runs as User:kaas-broker and may send the
// broker-to-broker APIs, with or without an authorizer. The token travels
// as the listener does: in the clear on PLAINTEXT (as SASL/PLAIN would),
// encrypted on SSL listeners.

import (
	"context"
	"crypto/subtle"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"kaas/net/server"
)

const (
	PeerMechanism = "KAAS-PEER"
	peerPrincipal = "kaas-broker"
)

// Cluster is what the peer mechanism needs of the broker's cluster mode:
// the peer secret, ok false for a broker outside a cluster.
type Cluster func() (secret string, ok bool)

// IsPeer reports whether the call comes from a broker of this cluster.
func (sec *Security) IsPeer(c *server.Call) bool {
	_, clustered := sec.cfg.Cluster()
	return clustered && c.Session().Mechanism() == PeerMechanism
}

// PeerHandshake is SaslHandshake for KAAS-PEER, on any listener of a
// cluster broker (on one without SASL the connection is anonymous until
// then).
func (sec *Security) PeerHandshake(c *server.Call, req *kmsg.SASLHandshakeRequest, resp *kmsg.SASLHandshakeResponse) kmsg.Response {
	s := c.Session()
	if s.Mechanism() != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	With(c, func(st *State) { st.Stage, st.Peer = StageAuthenticate, true })
	if req.Version == 0 {
		s.SetRawTokens(true)
	}
	return resp
}

// PeerAuthenticate checks the KAAS-PEER token.
func (sec *Security) PeerAuthenticate(c *server.Call, req *kmsg.SASLAuthenticateRequest, resp *kmsg.SASLAuthenticateResponse) kmsg.Response {
	s := c.Session()
	s.SetRawTokens(false)
	secret, _ := sec.cfg.Cluster()
	want := []byte(secret)
	if len(want) == 0 || subtle.ConstantTimeCompare(req.SASLAuthBytes, want) != 1 {
		sec.cfg.Logger.Warn("peer broker authentication failed", "remote", c.Remote, "listener", s.Listener)
		With(c, func(st *State) { st.Stage, st.Peer = StageFailed, false })
		msg := "authentication failed"
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		sec.FailAuth(c, PeerMechanism, resp)
		return nil
	}
	With(c, func(st *State) { st.Peer = false })
	sec.Authenticated(c, PeerMechanism, peerPrincipal)
	return resp
}

// PeerSASL is the client side of KAAS-PEER, for the peer client.
func PeerSASL(secret string) sasl.Mechanism { return peerSASL{secret: secret} }

type peerSASL struct{ secret string }

func (m peerSASL) Name() string { return PeerMechanism }

func (m peerSASL) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return peerSASLDone{}, []byte(m.secret), nil
}

type peerSASLDone struct{}

func (peerSASLDone) Challenge([]byte) (bool, []byte, error) { return true, nil, nil }
