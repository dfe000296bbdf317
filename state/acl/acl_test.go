package acl

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func str(s string) *string { return &s }

// testAclsFilter from Apache's AuthorizerTest: listing and deleting by
// filter, MATCH selecting the wildcard and covering prefixes, and delete
// filters each reporting everything they matched.
func TestFilters(t *testing.T) {
	acl1 := b(Topic, "foo-1", Literal, alice, "*", Read, Allow)
	acl2 := b(Topic, "foo-1", Literal, alice, "192.168.0.1", Write, Allow)
	acl3 := b(Topic, "bar-1", Literal, alice, "*", Describe, Allow)
	acl4 := b(Topic, "bar-", Prefixed, WildcardPrincipal, "*", Read, Allow)
	a := New(nil, false).Add([]Binding{acl1, acl2, acl3, acl4, acl1}) // a duplicate changes nothing
	any := Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: AnyType, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	exact := func(x Binding) Filter {
		return Filter{x.ResourceType, &x.ResourceName, x.PatternType, &x.Principal, &x.Host, x.Operation, x.Permission}
	}
	resource := func(rt ResourceType, name string, pt PatternType) Filter {
		f := any
		f.ResourceType, f.ResourceName, f.PatternType = rt, &name, pt
		return f
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []Binding
	}{
		{"any", any, []Binding{acl4, acl3, acl1, acl2}},
		{"resource1", resource(Topic, "foo-1", Literal), []Binding{acl1, acl2}},
		{"prefixed", resource(Topic, "bar-", Prefixed), []Binding{acl4}},
		{"match", resource(kmsg.ACLResourceTypeAny, "bar-1", Match), []Binding{acl4, acl3}},
		{"any pattern is exact on the name", resource(Topic, "bar-", AnyType), []Binding{acl4}},
		{"principal", Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: AnyType, Principal: str(WildcardPrincipal), Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, []Binding{acl4}},
		{"host", Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: AnyType, Host: str("192.168.0.1"), Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}, []Binding{acl2}},
		{"operation", Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: AnyType, Operation: Describe, Permission: kmsg.ACLPermissionTypeAny}, []Binding{acl3}},
	} {
		if got := a.Find(tc.f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	// A MATCH on a name the literal wildcard covers.
	w := New(nil, false).Add([]Binding{b(Group, "*", Literal, alice, "*", Read, Allow)})
	if got := w.Find(resource(Group, "g", Match)); len(got) != 1 {
		t.Errorf("match wildcard: got %v", got)
	}

	after, matched := a.Remove([]Filter{resource(kmsg.ACLResourceTypeAny, "bar-1", Match), exact(acl1), resource(Topic, "bar-1", Literal), resource(Topic, "baz", AnyType)})
	want := [][]Binding{{acl4, acl3}, {acl1}, {acl3}, nil}
	if !reflect.DeepEqual(matched, want) {
		t.Errorf("deleted %v, want %v", matched, want)
	}
	if got := after.ACLs(); !reflect.DeepEqual(got, []Binding{acl2}) {
		t.Errorf("left %v, want [%v]", got, acl2)
	}
}

func TestValidate(t *testing.T) {
	ok := b(Topic, "t", Literal, alice, "*", Read, Allow)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*Binding){
		"any resource type":      func(x *Binding) { x.ResourceType = kmsg.ACLResourceTypeAny },
		"unknown resource type":  func(x *Binding) { x.ResourceType = 42 },
		"match pattern":          func(x *Binding) { x.PatternType = Match },
		"any operation":          func(x *Binding) { x.Operation = kmsg.ACLOperationAny },
		"unknown operation":      func(x *Binding) { x.Operation = 99 },
		"any permission":         func(x *Binding) { x.Permission = kmsg.ACLPermissionTypeAny },
		"empty name":             func(x *Binding) { x.ResourceName = "" },
		"cluster named wrongly":  func(x *Binding) { x.ResourceType = Cluster },
		"principal with no type": func(x *Binding) { x.Principal = "alice" },
	}
	for name, mutate := range bad {
		x := ok
		mutate(&x)
		err := x.Validate()
		if _, isInvalid := err.(*InvalidError); !isInvalid {
			t.Errorf("%s: got %v, want an InvalidError", name, err)
		}
	}
	c := b(Cluster, ClusterName, Literal, alice, "*", Alter, Allow)
	if err := c.Validate(); err != nil {
		t.Errorf("cluster: %v", err)
	}
	if err := (Filter{ResourceType: 42, PatternType: AnyType, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}).Validate(); err == nil {
		t.Error("filter with an unknown resource type: want an error")
	}
}

func TestParseSuperUsers(t *testing.T) {
	got, err := ParseSuperUsers(" User:admin ; User:CN=broker,O=kaas;")
	if err != nil || !reflect.DeepEqual(got, []string{"User:admin", "User:CN=broker,O=kaas"}) {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := ParseSuperUsers("admin"); err == nil {
		t.Error("a principal without a type: want an error")
	}
}
