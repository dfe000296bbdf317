package acl

import (
	"net/netip"
	"slices"
	"strings"
)

// Session is who asks: the connection's principal ("User:alice") and the
// client's IP address.
type Session struct {
	Principal string
	Host      string
}

// Authorizer decides as Apache's StandardAuthorizer. It is immutable:
// WithACLs returns a new one, so a broker keeps the current one behind an
// atomic pointer and every request reads a consistent snapshot.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool // allow.everyone.if.no.acl.found
	acls         []Binding
	index        map[ResourceType]*typeIndex
}

// typeIndex holds one resource type's bindings by pattern: a resource
// named n is governed by literal[n], literal["*"] and prefixed[p] for every
// prefix p of n.
type typeIndex struct {
	literal  map[string][]Binding
	prefixed map[string][]Binding
}

// New returns an authorizer with no ACLs.
func New(superUsers []string, allowIfNoACL bool) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: allowIfNoACL}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	return a.WithACLs(nil)
}

// WithACLs returns a copy of a holding exactly bindings.
func (a *Authorizer) WithACLs(bindings []Binding) *Authorizer {
	n := &Authorizer{superUsers: a.superUsers, allowIfNoACL: a.allowIfNoACL, index: map[ResourceType]*typeIndex{}}
	n.acls = sortBindings(slices.Clone(bindings))
	for _, b := range n.acls {
		ti := n.index[b.ResourceType]
		if ti == nil {
			ti = &typeIndex{literal: map[string][]Binding{}, prefixed: map[string][]Binding{}}
			n.index[b.ResourceType] = ti
		}
		if b.PatternType == Prefixed {
			ti.prefixed[b.ResourceName] = append(ti.prefixed[b.ResourceName], b)
		} else {
			ti.literal[b.ResourceName] = append(ti.literal[b.ResourceName], b)
		}
	}
	return n
}

// ACLs lists every binding, sorted. The slice is shared: do not modify it.
func (a *Authorizer) ACLs() []Binding { return a.acls }

// SuperUser reports whether principal is one of super.users.
func (a *Authorizer) SuperUser(principal string) bool { return a.superUsers[principal] }

// Find lists the bindings f matches, sorted.
func (a *Authorizer) Find(f Filter) []Binding {
	var out []Binding
	for _, b := range a.acls {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// Add returns an authorizer with bindings added (adding one that exists
// changes nothing, as Apache's createAcls).
func (a *Authorizer) Add(bindings []Binding) *Authorizer {
	return a.WithACLs(append(slices.Clone(a.acls), bindings...))
}

// Remove returns an authorizer without the bindings any filter matches,
// and for each filter the bindings it matched.
func (a *Authorizer) Remove(filters []Filter) (*Authorizer, [][]Binding) {
	matched := make([][]Binding, len(filters))
	var keep []Binding
	for _, b := range a.acls {
		gone := false
		for i, f := range filters {
			if f.Matches(b) {
				matched[i] = append(matched[i], b)
				gone = true
			}
		}
		if !gone {
			keep = append(keep, b)
		}
	}
	return a.WithACLs(keep), matched
}

// Rule says why a decision was made, for the audit log line.
type Rule struct {
	Allowed bool
	Reason  string // "SuperUser", "DefaultAllow", "DefaultDeny", "NoMatchingAllow", or "MatchingAcl"
	ACL     *Binding
}

func (r Rule) String() string {
	if r.ACL != nil {
		return r.Reason + "(" + r.ACL.String() + ")"
	}
	return r.Reason
}

// Authorize is StandardAuthorizerData.authorize for one literal resource:
// super users may do anything; otherwise a matching DENY wins over any
// ALLOW; an ALLOW matches its own operation, ALL, and the implications
// (READ, WRITE, DELETE, ALTER allow DESCRIBE; ALTER_CONFIGS allows
// DESCRIBE_CONFIGS), which DENY never has; a resource no binding names at
// all is decided by allow.everyone.if.no.acl.found.
func (a *Authorizer) Authorize(s Session, op Operation, rt ResourceType, name string) Rule {
	if a.superUsers[s.Principal] {
		return Rule{Allowed: true, Reason: "SuperUser"}
	}
	var allow *Binding
	hasResourceACLs := false
	check := func(bs []Binding) *Binding {
		for i := range bs {
			hasResourceACLs = true
			switch findResult(s, op, &bs[i]) {
			case resultDeny:
				return &bs[i]
			case resultAllow:
				allow = &bs[i]
			}
		}
		return nil
	}
	if ti := a.index[rt]; ti != nil {
		if d := check(ti.literal[name]); d != nil {
			return Rule{Reason: "MatchingAcl", ACL: d}
		}
		if len(ti.prefixed) > 0 {
			for i := 1; i <= len(name); i++ {
				if d := check(ti.prefixed[name[:i]]); d != nil {
					return Rule{Reason: "MatchingAcl", ACL: d}
				}
			}
		}
		if name != Wildcard {
			if d := check(ti.literal[Wildcard]); d != nil {
				return Rule{Reason: "MatchingAcl", ACL: d}
			}
		}
	}
	switch {
	case allow != nil:
		return Rule{Allowed: true, Reason: "MatchingAcl", ACL: allow}
	case !hasResourceACLs && a.allowIfNoACL:
		return Rule{Allowed: true, Reason: "DefaultAllow"}
	case !hasResourceACLs:
		return Rule{Reason: "DefaultDeny"}
	}
	return Rule{Reason: "NoMatchingAllow"}
}

// Allowed is Authorize reduced to its answer.
func (a *Authorizer) Allowed(s Session, op Operation, rt ResourceType, name string) bool {
	return a.Authorize(s, op, rt, name).Allowed
}

type result int

const (
	resultNone result = iota
	resultAllow
	resultDeny
)

// findResult is StandardAuthorizerData.findResult: does b apply to this
// principal, host and operation, and with which permission.
func findResult(s Session, op Operation, b *Binding) result {
	if b.Principal != s.Principal && b.Principal != WildcardPrincipal {
		return resultNone
	}
	if !hostMatches(b.Host, s.Host) {
		return resultNone
	}
	if b.Operation != All {
		if b.Permission == Allow {
			switch op {
			case Describe:
				if !impliesDescribe(b.Operation) {
					return resultNone
				}
			case DescribeConfigs:
				if b.Operation != DescribeConfigs && b.Operation != AlterConfigs {
					return resultNone
				}
			default:
				if b.Operation != op {
					return resultNone
				}
			}
		} else if b.Operation != op {
			return resultNone
		}
	}
	if b.Permission == Allow {
		return resultAllow
	}
	return resultDeny
}

func impliesDescribe(op Operation) bool {
	switch op {
	case Describe, Read, Write, Delete, Alter:
		return true
	}
	return false
}

// hostMatches compares an ACL's host with the client's address. Apache
// compares strings (Java's InetAddress.getHostAddress form); comparing
// the parsed addresses as well lets "::1" and "0:0:0:0:0:0:0:1" — Go's and
// Java's spelling of one IPv6 address — match each other.
func hostMatches(aclHost, host string) bool {
	if aclHost == Wildcard || aclHost == host {
		return true
	}
	if !strings.Contains(aclHost, ":") {
		return false
	}
	x, err1 := netip.ParseAddr(aclHost)
	y, err2 := netip.ParseAddr(host)
	return err1 == nil && err2 == nil && x.Unmap() == y.Unmap()
}

// AuthorizeByResourceType is Apache's Authorizer.authorizeByResourceType
// (KIP-679: may the principal do op on at least one resource of type rt?),
// used by InitProducerId for idempotent producers: allowed when a
// hard-coded name is allowed (super users, allow.everyone.if.no.acl.found),
// or some ALLOW binding of that type for the principal and host is not
// dominated by a DENY (a wildcard DENY dominates everything, a literal DENY
// its own name, a prefixed DENY every name it prefixes).
func (a *Authorizer) AuthorizeByResourceType(s Session, op Operation, rt ResourceType) bool {
	if a.Allowed(s, op, rt, "hardcode") {
		return true
	}
	denyLiteral, denyPrefix := map[string]bool{}, map[string]bool{}
	var allowLiteral, allowPrefix []string
	wildcardAllow := false
	for _, b := range a.acls {
		if b.ResourceType != rt || !hostMatches(b.Host, s.Host) {
			continue
		}
		if b.Principal != s.Principal && b.Principal != WildcardPrincipal {
			continue
		}
		if b.Operation != op && b.Operation != All {
			continue
		}
		if b.Permission == Deny {
			switch {
			case b.PatternType == Literal && b.ResourceName == Wildcard:
				return false
			case b.PatternType == Literal:
				denyLiteral[b.ResourceName] = true
			case b.PatternType == Prefixed:
				denyPrefix[b.ResourceName] = true
			}
			continue
		}
		switch {
		case b.PatternType == Literal && b.ResourceName == Wildcard:
			wildcardAllow = true // a wildcard DENY later in the list still wins
		case b.PatternType == Literal:
			allowLiteral = append(allowLiteral, b.ResourceName)
		case b.PatternType == Prefixed:
			allowPrefix = append(allowPrefix, b.ResourceName)
		}
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPrefix[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowLiteral {
		if !denyLiteral[n] && !dominated(n) {
			return true
		}
	}
	for _, n := range allowPrefix {
		if !dominated(n) {
			return true
		}
	}
	return false
}

// supportedOps are the operations each resource type has (Apache 3.7's
// AclEntry.supportedOperations), for the authorized-operations bit fields
// of Metadata, DescribeGroups and DescribeCluster.
var supportedOps = map[ResourceType][]Operation{
	Topic:           {Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs},
	Group:           {Read, Describe, Delete},
	Cluster:         {Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe},
	TransactionalID: {Describe, Write},
	DelegationToken: {Describe},
	User:            {CreateTokens, DescribeTokens},
}

// AuthorizedOperations is the bit field (bit n: operation code n) of the
// operations s may do on the resource.
func (a *Authorizer) AuthorizedOperations(s Session, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOps[rt] {
		if a.Allowed(s, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// AllOperations is the bit field of every operation of rt: what a broker
// without an authorizer reports (Apache's AuthHelper with no authorizer).
func AllOperations(rt ResourceType) int32 {
	var bits int32
	for _, op := range supportedOps[rt] {
		bits |= 1 << op
	}
	return bits
}
