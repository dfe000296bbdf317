package broker

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
	"kaas/state/acl"
)

const (
	peerMechanism = "KAAS-PEER"
	peerPrincipal = "kaas-broker"
)

// isPeer reports whether the call comes from a broker of this cluster.
func (b *Broker) isPeer(c *server.Call) bool {
	return b.cluster != nil && c.Session().Mechanism() == peerMechanism
}

// peerHandshake is SaslHandshake for KAAS-PEER, on any listener of a
// cluster broker (on one without SASL the connection is anonymous until
// then).
func (b *Broker) peerHandshake(c *server.Call, req *kmsg.SASLHandshakeRequest, resp *kmsg.SASLHandshakeResponse) kmsg.Response {
	s := c.Session()
	if s.Mechanism() != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp
	}
	withSASL(c, func(st *saslState) { st.stage, st.peer = stageAuthenticate, true })
	if req.Version == 0 {
		s.SetRawTokens(true)
	}
	return resp
}

// peerAuthenticate checks the KAAS-PEER token.
func (b *Broker) peerAuthenticate(c *server.Call, req *kmsg.SASLAuthenticateRequest, resp *kmsg.SASLAuthenticateResponse) kmsg.Response {
	s := c.Session()
	s.SetRawTokens(false)
	want := []byte(b.cluster.peerSecret)
	if len(want) == 0 || subtle.ConstantTimeCompare(req.SASLAuthBytes, want) != 1 {
		b.log.Warn("peer broker authentication failed", "remote", c.Remote, "listener", s.Listener)
		withSASL(c, func(st *saslState) { st.stage, st.peer = stageFailed, false })
		msg := "authentication failed"
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
		b.failAuth(c, peerMechanism, resp)
		return nil
	}
	withSASL(c, func(st *saslState) { st.peer = false })
	b.authenticated(c, peerMechanism, peerPrincipal)
	return resp
}

// peerSASL is the client side of KAAS-PEER, for the peer client.
type peerSASL struct{ secret string }

func (m peerSASL) Name() string { return peerMechanism }

func (m peerSASL) Authenticate(context.Context, string) (sasl.Session, []byte, error) {
	return peerSASLDone{}, []byte(m.secret), nil
}

type peerSASLDone struct{}

func (peerSASLDone) Challenge([]byte) (bool, []byte, error) { return true, nil, nil }

// peerAccess is whether the call may use a broker-to-broker API: a peer
// broker always; otherwise the access check the API has.
func (b *Broker) peerAccess(c *server.Call, a access) bool {
	return b.isPeer(c) || a.cluster(acl.ClusterAction)
}
