package auth

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"kaas/state/acl"
	"kaas/state/sasl"
	"kaas/storage/authstore"
	"kaas/storage/diskcheck"
)

// Security is the broker's authentication and authorization state. The
// authorizer and the user database are immutable snapshots behind atomic
// pointers: every request reads them without a lock; a change (CreateAcls,
// AlterUserScramCredentials) builds the next snapshot, persists it, and
// only then publishes it, under mu.
type Security struct {
	cfg   Config
	store *authstore.Store
	mu    sync.Mutex // serialises changes: persist, then publish

	authz  atomic.Pointer[acl.Authorizer] // nil: --authorizer off, everything allowed
	users  atomic.Pointer[authstore.Users]
	shapes atomic.Pointer[map[string]sasl.Shape] // of users, by mechanism: unknown users look the same
	sasl   *sasl.Server
}

// Open loads users and ACLs from the data directory.
func Open(cfg Config) (*Security, error) {
	store, err := authstore.Open(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	sec := &Security{cfg: cfg}
	sec.store = store
	users, err := store.LoadUsers()
	if err != nil {
		return nil, err
	}
	sec.publishUsers(users)
	secret, err := store.Secret()
	if err != nil {
		return nil, err
	}
	if sec.sasl, err = sasl.NewServer(sec.lookupUser, sec.shape, secret, cfg.SASLMechanisms); err != nil {
		return nil, err
	}
	if cfg.Authorizer {
		bindings, err := authstore.LoadACLs[acl.Binding](store)
		if err != nil {
			return nil, err
		}
		for _, bd := range bindings {
			if err := bd.Validate(); err != nil {
				return nil, fmt.Errorf("%s: stored ACL %v: %w", store.Dir(), bd, err)
			}
		}
		sec.authz.Store(acl.New(cfg.SuperUsers, cfg.AllowEveryoneIfNoACL).WithACLs(bindings))
	}
	return sec, nil
}

// Authorizer is the current authorizer; nil with --authorizer off
// (everything allowed).
func (sec *Security) Authorizer() *acl.Authorizer { return sec.authz.Load() }

// Users is the current user database (a snapshot: never change it).
func (sec *Security) Users() authstore.Users { return *sec.users.Load() }

// SASL is the server SASL exchanges start on.
func (sec *Security) SASL() *sasl.Server { return sec.sasl }

func (sec *Security) lookupUser(user, mechanism string) (sasl.Credential, bool) {
	c, ok := (*sec.users.Load())[user][mechanism]
	return sasl.Credential(c), ok
}

// shape is what an unknown user's made-up credential looks like.
func (sec *Security) shape(mechanism string) sasl.Shape {
	if sh, ok := (*sec.shapes.Load())[mechanism]; ok {
		return sh
	}
	return sasl.DefaultShape
}

// publishUsers makes users the current user database.
func (sec *Security) publishUsers(users authstore.Users) {
	shapes := map[string]sasl.Shape{}
	for _, m := range sasl.ScramMechanisms {
		shapes[m] = sasl.CommonShape(func(yield func(sasl.Credential) bool) {
			for _, creds := range users {
				if c, ok := creds[m]; ok && !yield(sasl.Credential(c)) {
					return
				}
			}
		})
	}
	sec.shapes.Store(&shapes)
	sec.users.Store(&users)
}

// AlterUsers applies fn to a copy of the user database, persists the
// result and publishes it. fn reports whether anything changed.
func (sec *Security) AlterUsers(fn func(authstore.Users) bool) error {
	diskcheck.Blocking("the security lock, held while users and ACLs are persisted:", "security.mu")
	sec.mu.Lock()
	defer sec.mu.Unlock()
	next := authstore.Users{}
	for u, creds := range *sec.users.Load() {
		next[u] = maps.Clone(creds)
	}
	if !fn(next) {
		return nil
	}
	if err := sec.store.SaveUsers(next); err != nil {
		return err
	}
	sec.publishUsers(next)
	return nil
}

// AlterACLs replaces the authorizer with fn's result once it is
// persisted. fn sees the current one.
func (sec *Security) AlterACLs(fn func(*acl.Authorizer) *acl.Authorizer) error {
	diskcheck.Blocking("the security lock, held while users and ACLs are persisted:", "security.mu")
	sec.mu.Lock()
	defer sec.mu.Unlock()
	cur := sec.authz.Load()
	next := fn(cur)
	if next == cur {
		return nil
	}
	if err := authstore.SaveACLs(sec.store, next.ACLs()); err != nil {
		return err
	}
	sec.authz.Store(next)
	return nil
}
