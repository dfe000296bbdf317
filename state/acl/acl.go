// Package acl is the authorizer: ACL bindings, the filters CreateAcls,
// DescribeAcls and DeleteAcls use, and the decision Apache's
// StandardAuthorizer makes for a principal, a host, an operation and a
// resource. It is pure: a Set is an immutable snapshot (a change builds a
// new one), so any goroutine may authorize against it without a lock.
package acl

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The enums are Kafka's own codes (kmsg names them), so a binding goes to
// and from the wire without translation.
type (
	ResourceType = kmsg.ACLResourceType
	PatternType  = kmsg.ACLResourcePatternType
	Operation    = kmsg.ACLOperation
	Permission   = kmsg.ACLPermissionType
)

// Values used by the authorizer.
const (
	Topic           = kmsg.ACLResourceTypeTopic
	Group           = kmsg.ACLResourceTypeGroup
	Cluster         = kmsg.ACLResourceTypeCluster
	TransactionalID = kmsg.ACLResourceTypeTransactionalId
	DelegationToken = kmsg.ACLResourceTypeDelegationToken
	User            = kmsg.ACLResourceTypeUser

	Literal  = kmsg.ACLResourcePatternTypeLiteral
	Prefixed = kmsg.ACLResourcePatternTypePrefixed
	Match    = kmsg.ACLResourcePatternTypeMatch
	AnyType  = kmsg.ACLResourcePatternTypeAny

	Allow = kmsg.ACLPermissionTypeAllow
	Deny  = kmsg.ACLPermissionTypeDeny

	All             = kmsg.ACLOperationAll
	Read            = kmsg.ACLOperationRead
	Write           = kmsg.ACLOperationWrite
	Create          = kmsg.ACLOperationCreate
	Delete          = kmsg.ACLOperationDelete
	Alter           = kmsg.ACLOperationAlter
	Describe        = kmsg.ACLOperationDescribe
	ClusterAction   = kmsg.ACLOperationClusterAction
	DescribeConfigs = kmsg.ACLOperationDescribeConfigs
	AlterConfigs    = kmsg.ACLOperationAlterConfigs
	IdempotentWrite = kmsg.ACLOperationIdempotentWrite
	CreateTokens    = kmsg.ACLOperationCreateTokens
	DescribeTokens  = kmsg.ACLOperationDescribeTokens
)

// ClusterName is the one name the cluster resource has.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name and host that match any name or host, in
// literal bindings; WildcardPrincipal matches any principal.
const (
	Wildcard          = "*"
	WildcardPrincipal = "User:*"
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType `json:"resource_type"`
	ResourceName string       `json:"resource_name"`
	PatternType  PatternType  `json:"pattern_type"`
	Principal    string       `json:"principal"` // "User:alice", or "User:*"
	Host         string       `json:"host"`      // an IP address, or "*"
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s:%s:%s, %s from %s: %s %s)", b.ResourceType, b.PatternType, b.ResourceName,
		b.Principal, b.Host, b.Permission, b.Operation)
}

// compare orders bindings for listing: by resource, then entry.
func compare(a, b Binding) int {
	return cmp.Or(
		cmp.Compare(a.ResourceType, b.ResourceType),
		cmp.Compare(a.ResourceName, b.ResourceName),
		cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.Principal, b.Principal),
		cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation),
		cmp.Compare(a.Permission, b.Permission),
	)
}

// InvalidError is a binding or filter the broker refuses (Kafka's
// INVALID_REQUEST), with Apache's message.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, a ...any) error { return &InvalidError{fmt.Sprintf(format, a...)} }

// Validate checks a binding to be created as Apache does (AclApis and
// AclControlManager.validateNewAcl): a concrete resource type, a literal
// or prefixed pattern, a concrete operation and permission, a non-empty
// name ("kafka-cluster" for the cluster) and a "Type:name" principal.
func (b Binding) Validate() error {
	if !knownResource(b.ResourceType) {
		return invalid("Invalid resourceType %s", b.ResourceType)
	}
	if b.PatternType != Literal && b.PatternType != Prefixed {
		return invalid("Invalid patternType %s", b.PatternType)
	}
	if b.Operation < All || b.Operation > DescribeTokens {
		return invalid("Invalid operation %s", b.Operation)
	}
	if b.Permission != Allow && b.Permission != Deny {
		return invalid("Invalid permissionType %s", b.Permission)
	}
	if b.ResourceType == Cluster && b.ResourceName != ClusterName {
		return invalid("The only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if b.ResourceName == "" {
		return invalid("Invalid empty resource name")
	}
	if _, _, err := ParsePrincipal(b.Principal); err != nil {
		return invalid("%v", err)
	}
	return nil
}

func knownResource(rt ResourceType) bool { return rt >= Topic && rt <= User }

// Filter selects bindings (DescribeAcls, DeleteAcls). Nil strings match
// any value; the Any enum values (and Match for the pattern) widen the
// match as in Apache's AclBindingFilter.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate refuses the unknown values Apache's AclControlManager refuses
// for a delete filter.
func (f Filter) Validate() error {
	if !knownResource(f.ResourceType) && f.ResourceType != kmsg.ACLResourceTypeAny {
		return invalid("Unknown patternFilter.")
	}
	if f.PatternType < AnyType || f.PatternType > Prefixed {
		return invalid("Unknown patternFilter.")
	}
	if f.Operation < kmsg.ACLOperationAny || f.Operation > DescribeTokens {
		return invalid("Unknown entryFilter.")
	}
	if f.Permission < kmsg.ACLPermissionTypeAny || f.Permission > Allow {
		return invalid("Unknown entryFilter.")
	}
	return nil
}

// Matches is Apache's AclBindingFilter.matches: ResourcePatternFilter
// (where MATCH also selects the literal wildcard and every prefixed
// pattern the name starts with) and AccessControlEntryFilter.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != AnyType && f.PatternType != Match && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName != nil {
		name := *f.ResourceName
		switch {
		case f.PatternType == AnyType || f.PatternType == b.PatternType:
			if name != b.ResourceName {
				return false
			}
		case b.PatternType == Literal:
			if name != b.ResourceName && b.ResourceName != Wildcard {
				return false
			}
		case b.PatternType == Prefixed:
			if len(name) < len(b.ResourceName) || name[:len(b.ResourceName)] != b.ResourceName {
				return false
			}
		default:
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != kmsg.ACLOperationAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission
}

// sortBindings sorts and removes duplicates in place.
func sortBindings(bs []Binding) []Binding {
	slices.SortFunc(bs, compare)
	return slices.Compact(bs)
}
