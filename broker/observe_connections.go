package broker

import (
	"crypto/tls"

	"kaas/broker/admin"
	"kaas/net/server"
	"kaas/state/acl"
)

// Sessions lists the open client connections, with the principal each
// runs as (the inspector shows them).
func (b *Broker) Sessions() []*server.Session { return b.srv.Sessions() }

// connections describes the open client connections for the inspector.
func (b *Broker) connections() []admin.Connection {
	var out []admin.Connection
	for _, s := range b.srv.Sessions() {
		c := admin.Connection{ID: s.ID, Listener: s.Listener, Protocol: string(s.Protocol), Remote: s.Remote,
			Principal: s.Principal(), Authenticated: s.Authenticated(), Mechanism: s.Mechanism(), Opened: s.Opened,
			Reauthentications: s.Reauthentications()}
		if exp := s.Expires(); !exp.IsZero() {
			c.SessionExpires = &exp
		}
		if s.TLS != nil {
			c.TLSVersion = tls.VersionName(s.TLS.Version)
			c.CipherSuite = tls.CipherSuiteName(s.TLS.CipherSuite)
			if len(s.TLS.PeerCertificates) > 0 {
				c.ClientCert = acl.RFC2253(s.TLS.PeerCertificates[0].RawSubject)
			}
		}
		out = append(out, c)
	}
	return out
}
