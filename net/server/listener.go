package server

import "crypto/tls"

// Protocol is a listener's security protocol, as Apache names them.
type Protocol string

// The four security protocols.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// ParseProtocol reads a protocol name.
func ParseProtocol(s string) (Protocol, bool) {
	switch p := Protocol(s); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, true
	}
	return "", false
}

// TLS reports whether connections start with a TLS handshake.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether connections must authenticate with SASL before
// any request other than ApiVersions and SaslHandshake.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// Listener is one address the front end serves.
type Listener struct {
	Name     string // Apache's listener name ("PLAINTEXT", "INTERNAL", ...)
	Protocol Protocol
	Addr     string // host:port; port 0 picks one
	// TLS serves TLS listeners; its GetConfigForClient may reload
	// certificates.
	TLS *tls.Config
	// Principal names a new connection before any SASL exchange: from its
	// verified client certificate, or anonymous (state nil: no TLS).
	Principal func(state *tls.ConnectionState) string
}
