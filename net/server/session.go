package server

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/wire"
)

// Session is one client connection's identity, shared by every call on
// it: the listener it came in on, the TLS state, and the principal the
// broker authorizes its requests as. The principal starts as what the
// transport established (Listener.Principal: the certificate subject, or
// anonymous) and changes once, when SASL authentication succeeds.
type Session struct {
	ID       uint64
	Listener string // listener name, e.g. "SASL_SSL"
	Protocol Protocol
	Remote   string // host:port
	Host     string // the client's IP address, for ACL host matching
	TLS      *tls.ConnectionState
	Opened   time.Time

	principal     atomic.Pointer[string]
	authenticated atomic.Bool
	mechanism     atomic.Pointer[string]
	rawTokens     atomic.Bool
	expires       atomic.Int64 // unix nanoseconds the SASL session ends (KIP-368); 0: never
	reauths       atomic.Int64 // completed re-authentications

	// authMu guards Auth, the broker's SASL conversation state. Requests
	// on a connection are served one at a time until it authenticates,
	// so the lock is never contended; it keeps the race detector honest
	// when a conversation step moves to another goroutine.
	authMu sync.Mutex
	auth   any

	// software is the client's name and version from ApiVersions v3+
	// (KIP-511), which KIP-714 subscriptions may match on.
	software atomic.Pointer[[2]string]
}

// SetClientSoftware records what ApiVersions said the client is.
func (s *Session) SetClientSoftware(name, version string) {
	s.software.Store(&[2]string{name, version})
}

// ClientSoftware is the client's software name and version ("" unknown).
func (s *Session) ClientSoftware() (name, version string) {
	if p := s.software.Load(); p != nil {
		return p[0], p[1]
	}
	return "", ""
}

// Principal is who the connection's requests run as ("User:alice").
func (s *Session) Principal() string {
	if p := s.principal.Load(); p != nil {
		return *p
	}
	return ""
}

// Authenticated reports whether the connection may send any request: a
// listener without SASL is authenticated from the start; a SASL listener
// once the exchange succeeded.
func (s *Session) Authenticated() bool { return s.authenticated.Load() }

// Mechanism is the SASL mechanism the connection authenticated with, "" if
// none.
func (s *Session) Mechanism() string {
	if m := s.mechanism.Load(); m != nil {
		return *m
	}
	return ""
}

// SetAuthenticated records a successful SASL exchange, and when the
// session it opened ends (the zero time: never). A re-authentication
// (reauth) keeps the principal and counts.
func (s *Session) SetAuthenticated(principal, mechanism string, expires time.Time, reauth bool) {
	s.principal.Store(&principal)
	s.mechanism.Store(&mechanism)
	var ns int64
	if !expires.IsZero() {
		ns = expires.UnixNano()
	}
	s.expires.Store(ns)
	if reauth {
		s.reauths.Add(1)
	}
	s.authenticated.Store(true)
}

// BeginReauthentication puts an authenticated SASL connection back to
// authenticating (KIP-368): its principal stays, but until the new
// exchange succeeds only SASL requests may come, in frames within the
// pre-authentication limit.
func (s *Session) BeginReauthentication() { s.authenticated.Store(false) }

// Expires is when the SASL session ends (connections.max.reauth.ms after
// the last authentication); the zero time when it never does.
func (s *Session) Expires() time.Time {
	if ns := s.expires.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Reauthentications counts the connection's completed re-authentications.
func (s *Session) Reauthentications() int64 { return s.reauths.Load() }

// SetRawTokens switches how the connection's next frames are read: as
// bare SASL tokens (after a v0 SaslHandshake, whose exchange has no Kafka
// headers), each delivered as a SaslAuthenticate call with Raw set and
// answered with the bare reply token; or, when off again, as requests.
func (s *Session) SetRawTokens(on bool) { s.rawTokens.Store(on) }

// AuthState runs fn with the broker's SASL state for this connection
// (nil at first), storing what fn returns.
func (s *Session) AuthState(fn func(state any) any) {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	s.auth = fn(s.auth)
}

func (s *Session) setPrincipal(p string) { s.principal.Store(&p) }

var sessionIDs atomic.Uint64

// newSession describes a connection that just opened on listener l (its
// TLS handshake done, if any).
func (s *Server) newSession(l Listener, remote string, state *tls.ConnectionState) *Session {
	sess := &Session{ID: sessionIDs.Add(1), Listener: l.Name, Protocol: l.Protocol, Remote: remote, TLS: state, Opened: time.Now()}
	if host, _, err := net.SplitHostPort(remote); err == nil {
		sess.Host = host
	}
	if l.Principal != nil {
		sess.setPrincipal(l.Principal(state))
	}
	sess.authenticated.Store(!l.Protocol.SASL())
	return sess
}

// rawTokenCall wraps a bare SASL token (see SetRawTokens) as a
// SaslAuthenticate call.
func rawTokenCall(cn *conn, frame []byte, held int64) *Call {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = frame
	return &Call{Header: wire.Header{Key: req.Key()}, Request: req, Received: time.Now(), Remote: cn.remote, Raw: true, conn: cn, held: held}
}
