package auth

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

// Access answers "may this call do that?" for one request: the checks
// the handlers make. With the authorizer off (the default) every check
// passes and costs a nil test. Denied checks of resources the client
// named are logged (Apache's kafka.authorizer.logger at INFO) and counted
// by API on /metrics; checks that only filter what a listing shows are
// silent, as Apache's logIfDenied=false.
type Access struct {
	sec  *Security
	az   *acl.Authorizer
	s    acl.Session
	call *server.Call
}

// On reports whether an authorizer decides (--authorizer): off, every
// check passes.
func (a Access) On() bool { return a.az != nil }

// Call is the call the checks are for.
func (a Access) Call() *server.Call { return a.call }

// Access is the checks of call c, against the authorizer of now. The zero
// Access allows everything (the operator on the admin listener).
func (sec *Security) Access(c *server.Call) Access {
	a := Access{sec: sec, az: sec.Authorizer(), call: c}
	if a.az != nil {
		a.s = callSession(c)
	}
	return a
}

// callSession is who a call runs as, for the authorizer.
func callSession(c *server.Call) acl.Session {
	s := c.Session()
	return acl.Session{Principal: s.Principal(), Host: s.Host}
}

// Allowed checks op on a resource the request names.
func (a Access) Allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	if a.az == nil {
		return true
	}
	r := a.az.Authorize(a.s, op, rt, name)
	if !r.Allowed {
		api := kmsg.NameForKey(a.call.Key)
		a.sec.cfg.Metrics.AuthorizationDenials.WithLabelValues(api, strings.ToLower(rt.String())).Inc()
		a.sec.cfg.Logger.Info("authorization denied", "principal", a.s.Principal, "host", a.s.Host,
			"operation", op.String(), "resource", rt.String()+":"+name, "api", api, "rule", r.String())
	}
	return r.Allowed
}

// Visible checks op for filtering a listing: no log line, no count.
func (a Access) Visible(op acl.Operation, rt acl.ResourceType, name string) bool {
	return a.az == nil || a.az.Allowed(a.s, op, rt, name)
}

// Cluster checks op on the cluster resource.
func (a Access) Cluster(op acl.Operation) bool { return a.Allowed(op, acl.Cluster, acl.ClusterName) }

// Topic, Group and TxnID check op on one resource of that type.
func (a Access) Topic(op acl.Operation, name string) bool { return a.Allowed(op, acl.Topic, name) }
func (a Access) Group(op acl.Operation, name string) bool { return a.Allowed(op, acl.Group, name) }
func (a Access) TxnID(op acl.Operation, name string) bool {
	return a.Allowed(op, acl.TransactionalID, name)
}

// Topics checks op once per distinct topic name (Apache's
// filterByAuthorized) and returns the names allowed; nil when everything
// is allowed, so callers test with AllowedIn.
func (a Access) Topics(op acl.Operation, names func(yield func(string) bool)) map[string]bool {
	if a.az == nil {
		return nil
	}
	out := map[string]bool{}
	seen := map[string]bool{}
	for n := range names {
		if !seen[n] {
			seen[n] = true
			out[n] = a.Topic(op, n)
		}
	}
	return out
}

// AllowedIn reads a Topics result.
func AllowedIn(m map[string]bool, name string) bool { return m == nil || m[name] }

// Operations is the authorized-operations bit field of a resource, as
// Metadata, DescribeGroups and DescribeCluster report it when asked.
func (a Access) Operations(rt acl.ResourceType, name string) int32 {
	if a.az == nil {
		return acl.AllOperations(rt)
	}
	return a.az.AuthorizedOperations(a.s, rt, name)
}

// ByResourceType is authorizeByResourceType (KIP-679).
func (a Access) ByResourceType(op acl.Operation, rt acl.ResourceType) bool {
	return a.az == nil || a.az.AuthorizeByResourceType(a.s, op, rt)
}

// Peer is whether the call may use a broker-to-broker API: a peer broker
// always; otherwise CLUSTER_ACTION on the cluster.
func (a Access) Peer() bool {
	return a.sec.IsPeer(a.call) || a.Cluster(acl.ClusterAction)
}

// MayCreate is the auto-creation check (Metadata, Produce): CREATE on the
// cluster (not logged when denied), or else CREATE on the topic.
func (a Access) MayCreate(topic string) bool {
	return a.Visible(acl.Create, acl.Cluster, acl.ClusterName) || a.Topic(acl.Create, topic)
}

// NamesOf lists name(item) for each item, for Access.Topics.
func NamesOf[T any](items []T, name func(*T) string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := range items {
			if !yield(name(&items[i])) {
				return
			}
		}
	}
}

// Configs checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource: broker, broker-logger and client-metrics configs are the
// cluster's, a topic's its own (Apache's ConfigHelper and configsAuthorizationApiError). It
// returns the error code to answer, 0 when allowed; resource types it
// does not know are left to the handler.
func (a Access) Configs(op acl.Operation, typ kmsg.ConfigResourceType, name string) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !a.Cluster(op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeTopic:
		if !a.Topic(op, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !a.Group(op, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	}
	return 0
}
