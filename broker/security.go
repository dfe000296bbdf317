package broker

import (
	"crypto/tls"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"kaas/broker/admin"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sasl"
	"kaas/storage/authstore"
	"kaas/storage/diskcheck"
)

// security is the broker's authentication and authorization state. The
// authorizer and the user database are immutable snapshots behind atomic
// pointers: every request reads them without a lock; a change (CreateAcls,
// AlterUserScramCredentials) builds the next snapshot, persists it, and
// only then publishes it, under mu.
type security struct {
	store *authstore.Store
	mu    sync.Mutex // serialises changes: persist, then publish

	authz  atomic.Pointer[acl.Authorizer] // nil: --authorizer off, everything allowed
	users  atomic.Pointer[authstore.Users]
	shapes atomic.Pointer[map[string]sasl.Shape] // of users, by mechanism: unknown users look the same
	sasl   *sasl.Server
}

// startSecurity loads users and ACLs from the data directory.
func (b *Broker) startSecurity() error {
	store, err := authstore.Open(b.cfg.DataDir)
	if err != nil {
		return err
	}
	sec := &b.sec
	sec.store = store
	users, err := store.LoadUsers()
	if err != nil {
		return err
	}
	sec.publishUsers(users)
	secret, err := store.Secret()
	if err != nil {
		return err
	}
	if sec.sasl, err = sasl.NewServer(sec.lookupUser, sec.shape, secret, b.cfg.SASLMechanisms); err != nil {
		return err
	}
	if b.cfg.Authorizer {
		bindings, err := authstore.LoadACLs[acl.Binding](store)
		if err != nil {
			return err
		}
		for _, bd := range bindings {
			if err := bd.Validate(); err != nil {
				return fmt.Errorf("%s: stored ACL %v: %w", store.Dir(), bd, err)
			}
		}
		sec.authz.Store(acl.New(b.cfg.SuperUsers, b.cfg.AllowEveryoneIfNoACL).WithACLs(bindings))
	}
	return nil
}

func (s *security) lookupUser(user, mechanism string) (authstore.Credential, bool) {
	c, ok := (*s.users.Load())[user][mechanism]
	return c, ok
}

// shape is what an unknown user's made-up credential looks like.
func (s *security) shape(mechanism string) sasl.Shape {
	if sh, ok := (*s.shapes.Load())[mechanism]; ok {
		return sh
	}
	return sasl.DefaultShape
}

// publishUsers makes users the current user database.
func (s *security) publishUsers(users authstore.Users) {
	shapes := map[string]sasl.Shape{}
	for _, m := range sasl.ScramMechanisms {
		shapes[m] = sasl.CommonShape(users, m)
	}
	s.shapes.Store(&shapes)
	s.users.Store(&users)
}

// alterUsers applies fn to a copy of the user database, persists the
// result and publishes it. fn reports whether anything changed.
func (s *security) alterUsers(fn func(authstore.Users) bool) error {
	diskcheck.Blocking("the security lock, held while users and ACLs are persisted:", "security.mu")
	s.mu.Lock()
	defer s.mu.Unlock()
	next := authstore.Users{}
	for u, creds := range *s.users.Load() {
		next[u] = maps.Clone(creds)
	}
	if !fn(next) {
		return nil
	}
	if err := s.store.SaveUsers(next); err != nil {
		return err
	}
	s.publishUsers(next)
	return nil
}

// alterACLs replaces the authorizer with fn's result once it is
// persisted. fn sees the current one.
func (s *security) alterACLs(fn func(*acl.Authorizer) *acl.Authorizer) error {
	diskcheck.Blocking("the security lock, held while users and ACLs are persisted:", "security.mu")
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.authz.Load()
	next := fn(cur)
	if next == cur {
		return nil
	}
	if err := authstore.SaveACLs(s.store, next.ACLs()); err != nil {
		return err
	}
	s.authz.Store(next)
	return nil
}

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
