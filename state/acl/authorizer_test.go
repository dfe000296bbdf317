package acl

import (
	"fmt"
	"testing"
)

// b builds a binding: b(Topic, "foo", Literal, "User:alice", "*", Read, Allow).
func b(rt ResourceType, name string, pt PatternType, principal, host string, op Operation, perm Permission) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

type check struct {
	principal, host string
	op              Operation
	rt              ResourceType
	name            string
	want            bool
}

func (c check) String() string {
	return fmt.Sprintf("%s@%s %s %s:%s", c.principal, c.host, c.op, c.rt, c.name)
}

func runChecks(t *testing.T, a *Authorizer, checks []check) {
	t.Helper()
	for _, c := range checks {
		if got := a.Allowed(Session{c.principal, c.host}, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%v: allowed=%v, want %v (rule %v)", c, got, c.want, a.Authorize(Session{c.principal, c.host}, c.op, c.rt, c.name))
		}
	}
}

const (
	alice = "User:alice"
	bob   = "User:bob"
	h1    = "192.168.1.1"
	h2    = "192.168.1.2"
)

// Cases from Apache's AuthorizerTest and StandardAuthorizerTest, one
// table per test there.
func TestAuthorize(t *testing.T) {
	tests := []struct {
		name         string
		superUsers   []string
		allowIfNoACL bool
		acls         []Binding
		checks       []check
	}{
		{
			name: "testTopicAcl",
			acls: []Binding{
				b(Topic, "t", Literal, alice, h1, Read, Allow),
				b(Topic, "t", Literal, alice, h2, Read, Allow),
				b(Topic, "t", Literal, alice, h1, Read, Deny),
				b(Topic, "t", Literal, alice, h1, Write, Allow),
				b(Topic, "t", Literal, alice, "*", Describe, Allow),
				b(Topic, "t", Literal, "User:rob", "*", Read, Allow),
				b(Topic, "t", Literal, "User:batman", "*", Write, Allow),
			},
			checks: []check{
				{alice, h2, Read, Topic, "t", true},
				{alice, h1, Read, Topic, "t", false}, // the DENY from h1
				{alice, h1, Write, Topic, "t", true},
				{alice, h2, Write, Topic, "t", false},
				{alice, h1, Describe, Topic, "t", true},
				{alice, h2, Describe, Topic, "t", true},
				{alice, h1, Alter, Topic, "t", false},
				{"User:rob", h1, Describe, Topic, "t", true}, // READ implies DESCRIBE
				{"User:batman", h1, Describe, Topic, "t", true},
				{"User:rob", h1, Read, Topic, "t", true},
				{"User:batman", h1, Write, Topic, "t", true},
			},
		},
		{
			name: "testDenyTakesPrecedence",
			acls: []Binding{
				b(Topic, "t", Literal, WildcardPrincipal, "*", All, Allow),
				b(Topic, "t", Literal, alice, h1, All, Deny),
			},
			checks: []check{{alice, h1, Read, Topic, "t", false}, {alice, h2, Read, Topic, "t", true}},
		},
		{
			name:   "testAllowAllAccess",
			acls:   []Binding{b(Topic, "t", Literal, WildcardPrincipal, "*", All, Allow)},
			checks: []check{{"User:random", "192.0.4.4", Read, Topic, "t", true}},
		},
		{
			name:       "testSuperUserHasAccess",
			superUsers: []string{"User:superuser1", "User:superuser2"},
			acls:       []Binding{b(Topic, "t", Literal, WildcardPrincipal, "*", All, Deny)},
			checks: []check{
				{"User:superuser1", "192.0.4.4", Read, Topic, "t", true},
				{"User:superuser2", "192.0.4.4", Read, Topic, "t", true},
				{alice, "192.0.4.4", Read, Topic, "t", false},
			},
		},
		{
			name: "testWildCardAcls",
			acls: []Binding{
				b(Topic, "*", Literal, alice, h1, Read, Allow),
				b(Topic, "t", Literal, alice, h1, Write, Allow),
				b(Topic, "*", Literal, alice, h1, Write, Deny),
			},
			checks: []check{
				{alice, h1, Read, Topic, "t", true},
				{alice, h1, Write, Topic, "t", false}, // the wildcard DENY wins over the literal ALLOW
				{alice, h1, Read, Topic, "*", true},
			},
		},
		{
			name:   "testNoAclFound",
			checks: []check{{alice, h1, Read, Topic, "t", false}},
		},
		{
			name:         "testNoAclFoundOverride",
			allowIfNoACL: true,
			acls:         []Binding{b(Topic, "other", Literal, bob, "*", Read, Allow)},
			checks: []check{
				{alice, h1, Read, Topic, "t", true},      // no binding names t
				{alice, h1, Read, Topic, "other", false}, // one does, and not for alice
			},
		},
		{
			name:   "testAuthorizeWithEmptyResourceName",
			acls:   []Binding{b(Group, "*", Literal, alice, "*", Read, Allow)},
			checks: []check{{alice, h1, Read, Group, "", true}, {bob, h1, Read, Group, "", false}},
		},
		{
			name: "testAccessAllowedIfAllowAclExistsOnPrefixedResource",
			acls: []Binding{b(Topic, "foo", Prefixed, alice, "*", Read, Allow)},
			checks: []check{
				{alice, h1, Read, Topic, "foo", true},
				{alice, h1, Read, Topic, "foobar", true},
				{alice, h1, Read, Topic, "fo", false},
				{alice, h1, Read, Topic, "bar", false},
			},
		},
		{
			name: "testSingleCharacterResourceAcls",
			acls: []Binding{b(Topic, "f", Literal, alice, "*", Read, Allow), b(Topic, "_", Prefixed, alice, "*", Read, Allow)},
			checks: []check{
				{alice, h1, Read, Topic, "f", true},
				{alice, h1, Read, Topic, "foo", false},
				{alice, h1, Read, Topic, "_foo", true},
				{alice, h1, Read, Topic, "_", true},
				{alice, h1, Read, Topic, "foo_", false},
			},
		},
		{
			name: "testSimpleAuthorizations",
			acls: []Binding{
				b(Topic, "foo_", Prefixed, WildcardPrincipal, "*", Read, Allow),
				b(Topic, "foo_", Prefixed, WildcardPrincipal, "*", Write, Allow),
				b(Group, "bar", Literal, WildcardPrincipal, "*", DescribeConfigs, Allow),
				b(Group, "bar", Literal, WildcardPrincipal, "*", AlterConfigs, Allow),
			},
			checks: []check{
				{bob, h1, Read, Topic, "foo_", true},
				{"User:fred", h1, AlterConfigs, Group, "bar", true},
				{"User:fred", h1, Read, Group, "bar", false},
			},
		},
		{
			name: "testDenyPrecedenceWithOperationAll",
			acls: []Binding{
				b(Topic, "foo", Literal, alice, "*", All, Deny),
				b(Topic, "foo", Prefixed, alice, "*", Read, Allow),
				b(Topic, "foo", Literal, WildcardPrincipal, "*", All, Deny),
				b(Topic, "foo", Prefixed, WildcardPrincipal, "*", Describe, Allow),
			},
			checks: []check{
				{alice, h1, Write, Topic, "foo", false},
				{alice, h1, Read, Topic, "foo", false},
				{alice, h1, Describe, Topic, "foo", false},
				{alice, h1, Read, Topic, "foobar", true},
				{bob, h1, Describe, Topic, "foo", false},
				{bob, h1, Read, Topic, "foo", false},
				{bob, h1, Write, Topic, "foo", false},
				{bob, h1, Describe, Topic, "foobaz", true},
				{bob, h1, Read, Topic, "foobaz", false},
			},
		},
		{
			name: "testTopicAclWithOperationAll",
			acls: []Binding{
				b(Topic, "foo", Literal, WildcardPrincipal, "*", All, Allow),
				b(Topic, "bar", Prefixed, alice, "*", All, Allow),
				b(Topic, "baz", Literal, bob, "*", All, Allow),
			},
			checks: []check{
				{alice, h1, Write, Topic, "foo", true},
				{alice, h1, DescribeConfigs, Topic, "bar", true},
				{alice, h1, Describe, Topic, "baz", false},
				{bob, h1, Write, Topic, "foo", true},
				{bob, h1, Read, Topic, "bar", false},
				{bob, h1, Describe, Topic, "baz", true},
				{"User:malory", h1, Describe, Topic, "foo", true},
				{"User:malory", h1, Write, Topic, "bar", false},
				{"User:malory", h1, Read, Topic, "baz", false},
			},
		},
		{
			name: "testHostAddressAclValidation",
			acls: []Binding{
				b(Topic, "foo", Literal, alice, h1, Read, Deny),
				b(Topic, "foo", Literal, alice, "*", Read, Allow),
				b(Topic, "bar", Literal, bob, h2, Read, Allow),
				b(Topic, "bar", Literal, WildcardPrincipal, "127.0.0.1", Describe, Allow),
			},
			checks: []check{
				{alice, "127.0.0.1", Read, Topic, "foo", true},
				{alice, "127.0.0.1", Read, Topic, "bar", false},
				{alice, "127.0.0.1", Describe, Topic, "bar", true},
				{alice, h1, Read, Topic, "foo", false},
				{alice, h1, Describe, Topic, "bar", false},
				{alice, h2, Read, Topic, "foo", true},
				{bob, "127.0.0.1", Describe, Topic, "bar", true},
				{bob, h1, Read, Topic, "bar", false},
				{bob, h2, Read, Topic, "bar", true},
				{bob, h2, Describe, Topic, "bar", true},
			},
		},
		{
			name: "testAuthorizationWithManyAcls",
			acls: []Binding{
				b(Topic, "green2", Literal, WildcardPrincipal, "*", Read, Allow),
				b(Topic, "green", Prefixed, bob, "*", Read, Allow),
				b(Topic, "betamax4", Literal, bob, "*", Read, Allow),
				b(Topic, "betamax", Literal, bob, "*", Read, Allow),
				b(Topic, "beta", Prefixed, WildcardPrincipal, "*", Read, Allow),
				b(Topic, "alpha", Prefixed, WildcardPrincipal, "*", Read, Allow),
				b(Topic, "alp", Prefixed, bob, "*", Read, Deny),
				b(Group, "*", Literal, bob, "*", Write, Allow),
				b(Group, "wheel", Literal, WildcardPrincipal, "*", Write, Deny),
			},
			checks: []check{
				{bob, h1, Read, Topic, "green1", true},
				{bob, h1, Write, Group, "wheel", false},
				{bob, h1, Read, Topic, "alpha", false},
				{bob, h1, Write, Group, "arbitrary", true},
				{bob, h1, Read, Topic, "ala", false},
				{alice, h1, Read, Topic, "alpha", true},
				{alice, h1, Read, Topic, "betamax", true},
			},
		},
		{
			name: "IPv6 spellings",
			acls: []Binding{b(Topic, "t", Literal, alice, "0:0:0:0:0:0:0:1", Read, Allow)},
			checks: []check{
				{alice, "::1", Read, Topic, "t", true},
				{alice, "127.0.0.1", Read, Topic, "t", false},
			},
		},
		{
			name: "other resource types are separate",
			acls: []Binding{b(Topic, "x", Literal, alice, "*", All, Allow)},
			checks: []check{
				{alice, h1, Read, Topic, "x", true},
				{alice, h1, Read, Group, "x", false},
				{alice, h1, Write, TransactionalID, "x", false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.superUsers, tt.allowIfNoACL).WithACLs(tt.acls)
			runChecks(t, a, tt.checks)
		})
	}
}

// testAclInheritance: ALLOW of an operation implies exactly the listed
// operations on the cluster resource; DENY implies nothing beyond itself
// except ALL, which denies everything.
func TestImplications(t *testing.T) {
	every := []Operation{Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens}
	allows := map[Operation][]Operation{
		All:          every,
		Read:         {Describe},
		Write:        {Describe},
		Delete:       {Describe},
		Alter:        {Describe},
		AlterConfigs: {DescribeConfigs},
		Create:       nil, // CREATE does not imply DESCRIBE
	}
	s := Session{alice, h1}
	for parent, implied := range allows {
		a := New(nil, false).WithACLs([]Binding{b(Cluster, ClusterName, Literal, alice, "*", parent, Allow)})
		for _, op := range every {
			want := op == parent || parent == All || contains(implied, op)
			if got := a.Allowed(s, op, Cluster, ClusterName); got != want {
				t.Errorf("ALLOW %v: %v allowed=%v, want %v", parent, op, got, want)
			}
		}
	}
	for _, parent := range []Operation{All, Describe, DescribeConfigs, Read, Write, Delete, Alter, AlterConfigs} {
		a := New(nil, false).WithACLs([]Binding{
			b(Cluster, ClusterName, Literal, alice, "*", parent, Deny),
			b(Cluster, ClusterName, Literal, alice, "*", All, Allow),
		})
		for _, op := range every {
			want := !(op == parent || parent == All)
			if got := a.Allowed(s, op, Cluster, ClusterName); got != want {
				t.Errorf("DENY %v: %v allowed=%v, want %v", parent, op, got, want)
			}
		}
	}
}

func contains(ops []Operation, op Operation) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// The authorizeByResourceType cases of Apache's BaseAuthorizerTest.
func TestAuthorizeByResourceType(t *testing.T) {
	u1 := "User:user1"
	allowRead := func(name string, pt PatternType) Binding { return b(Topic, name, pt, u1, h1, Read, Allow) }
	denyRead := func(name string, pt PatternType) Binding { return b(Topic, name, pt, u1, h1, Read, Deny) }
	g := func(x Binding) Binding { x.ResourceType = Group; return x }
	steps := []struct {
		name string
		acls []Binding
		s    Session
		op   Operation
		rt   ResourceType
		want bool
	}{
		{"no acls", nil, Session{u1, h1}, Read, Topic, false},
		{"one allow", []Binding{allowRead("sb1", Literal)}, Session{u1, h1}, Read, Topic, true},
		{"allow and deny on the same name", []Binding{allowRead("sb1", Literal), denyRead("sb1", Literal)}, Session{u1, h1}, Read, Topic, false},
		{"unrelated denies do not dominate", []Binding{
			b(Topic, "sb1", Literal, u1, h1, Read, Deny),
			b(Topic, "sb1", Literal, "User:user2", h1, Read, Deny),
			b(Topic, "sb1", Literal, u1, h2, Write, Deny),
			b(Topic, "sb1", Literal, "User:user2", h2, Read, Deny),
			b(Topic, "sb1", Literal, u1, h2, Read, Allow),
			b(Topic, "sb2", Literal, u1, h2, Read, Deny),
			b(Group, "s", Prefixed, u1, h2, Read, Deny),
		}, Session{u1, h2}, Read, Topic, true},
		{"prefixed allow abcde", []Binding{g(allowRead("abcde", Prefixed))}, Session{u1, h1}, Read, Group, true},
		{"deny abcd dominates abcde", []Binding{g(allowRead("abcde", Prefixed)), g(denyRead("abcd", Prefixed))}, Session{u1, h1}, Read, Group, false},
		{"allow abc escapes deny abcd", []Binding{g(allowRead("abcde", Prefixed)), g(denyRead("abcd", Prefixed)), g(allowRead("abc", Prefixed))}, Session{u1, h1}, Read, Group, true},
		{"deny a dominates all", []Binding{g(allowRead("abcde", Prefixed)), g(denyRead("abcd", Prefixed)), g(allowRead("abc", Prefixed)), g(denyRead("a", Prefixed)), g(allowRead("ab", Prefixed))}, Session{u1, h1}, Read, Group, false},
		{"wildcard deny dominates", []Binding{
			b(Group, "hello", Prefixed, u1, h1, Write, Allow),
			b(Group, "*", Literal, u1, h1, Write, Deny),
			b(Group, "*", Literal, u1, h1, Write, Allow),
			b(Group, "aloha", Literal, u1, h1, Write, Allow),
		}, Session{u1, h1}, Write, Group, false},
		{"ALL allow with an unrelated deny", []Binding{b(Topic, "sb1", Literal, u1, h1, Write, Deny), b(Topic, "sb1", Literal, u1, h1, All, Allow)}, Session{u1, h1}, Read, Topic, true},
		{"ALL deny", []Binding{b(Topic, "sb1", Literal, u1, h1, Write, Deny), b(Topic, "sb1", Literal, u1, h1, All, Allow), b(Topic, "sb1", Literal, u1, h1, All, Deny)}, Session{u1, h1}, Read, Topic, false},
		{"other host", []Binding{allowRead("sb1", Literal)}, Session{u1, h2}, Read, Topic, false},
		{"wildcard principal allow", []Binding{b(Topic, "sb2", Literal, WildcardPrincipal, h1, Read, Allow)}, Session{"User:user2", h1}, Read, Topic, true},
		{"wildcard principal deny", []Binding{b(Topic, "sb2", Literal, WildcardPrincipal, h1, Read, Allow), b(Topic, "sb2", Literal, WildcardPrincipal, h1, Read, Deny)}, Session{"User:user2", h1}, Read, Topic, false},
	}
	for _, st := range steps {
		a := New(nil, false).WithACLs(st.acls)
		if got := a.AuthorizeByResourceType(st.s, st.op, st.rt); got != st.want {
			t.Errorf("%s: got %v, want %v", st.name, got, st.want)
		}
	}
	// testAuthorizeByResourceTypeSuperUserHasAccess and the no-ACL override.
	deny := []Binding{}
	for _, rt := range []ResourceType{Topic, Cluster, Group, TransactionalID} {
		deny = append(deny, b(rt, "*", Literal, WildcardPrincipal, "*", All, Deny))
	}
	a := New([]string{"User:su"}, false).WithACLs(deny)
	for _, rt := range []ResourceType{Topic, Cluster, Group, TransactionalID} {
		if !a.AuthorizeByResourceType(Session{"User:su", "192.0.4.4"}, Read, rt) {
			t.Errorf("super user denied %v", rt)
		}
	}
	if !New(nil, true).AuthorizeByResourceType(Session{u1, h1}, Write, Topic) {
		t.Error("allow.everyone.if.no.acl.found with no ACLs: want allowed")
	}
}

func TestAuthorizedOperations(t *testing.T) {
	a := New(nil, false).WithACLs([]Binding{b(Topic, "t", Literal, alice, "*", Read, Allow)})
	got := a.AuthorizedOperations(Session{alice, h1}, Topic, "t")
	if want := int32(1<<Read | 1<<Describe); got != want {
		t.Errorf("got %b, want %b", got, want)
	}
	if got, want := AllOperations(Group), int32(1<<Read|1<<Describe|1<<Delete); got != want {
		t.Errorf("group: got %b, want %b", got, want)
	}
}
