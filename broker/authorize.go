package broker

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

// access answers "may this call do that?" for one request. With the
// authorizer off (the default) every check passes and costs a nil test.
// Denied checks of resources the client named are logged (Apache's
// kafka.authorizer.logger at INFO) and counted by API on /metrics; checks
// that only filter what a listing shows are silent, as Apache's
// logIfDenied=false.
type access struct {
	b    *Broker
	az   *acl.Authorizer
	s    acl.Session
	call *server.Call
}

func (b *Broker) access(c *server.Call) access {
	a := access{b: b, az: b.sec.Authorizer(), call: c}
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

// allowed checks op on a resource the request names.
func (a access) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	if a.az == nil {
		return true
	}
	r := a.az.Authorize(a.s, op, rt, name)
	if !r.Allowed {
		api := kmsg.NameForKey(a.call.Key)
		a.b.metrics.AuthorizationDenials.WithLabelValues(api, strings.ToLower(rt.String())).Inc()
		a.b.log.Info("authorization denied", "principal", a.s.Principal, "host", a.s.Host,
			"operation", op.String(), "resource", rt.String()+":"+name, "api", api, "rule", r.String())
	}
	return r.Allowed
}

// visible checks op for filtering a listing: no log line, no count.
func (a access) visible(op acl.Operation, rt acl.ResourceType, name string) bool {
	return a.az == nil || a.az.Allowed(a.s, op, rt, name)
}

// cluster checks op on the cluster resource.
func (a access) cluster(op acl.Operation) bool { return a.allowed(op, acl.Cluster, acl.ClusterName) }

// topic, group and txnID check op on one resource of that type.
func (a access) topic(op acl.Operation, name string) bool { return a.allowed(op, acl.Topic, name) }
func (a access) group(op acl.Operation, name string) bool { return a.allowed(op, acl.Group, name) }
func (a access) txnID(op acl.Operation, name string) bool {
	return a.allowed(op, acl.TransactionalID, name)
}

// topics checks op once per distinct topic name (Apache's
// filterByAuthorized) and returns the names allowed; nil when everything
// is allowed, so callers test with allowedIn.
func (a access) topics(op acl.Operation, names func(yield func(string) bool)) map[string]bool {
	if a.az == nil {
		return nil
	}
	out := map[string]bool{}
	seen := map[string]bool{}
	for n := range names {
		if !seen[n] {
			seen[n] = true
			out[n] = a.topic(op, n)
		}
	}
	return out
}

// allowedIn reads a topics result.
func allowedIn(m map[string]bool, name string) bool { return m == nil || m[name] }

// operations is the authorized-operations bit field of a resource, as
// Metadata, DescribeGroups and DescribeCluster report it when asked.
func (a access) operations(rt acl.ResourceType, name string) int32 {
	if a.az == nil {
		return acl.AllOperations(rt)
	}
	return a.az.AuthorizedOperations(a.s, rt, name)
}

// byResourceType is authorizeByResourceType (KIP-679).
func (a access) byResourceType(op acl.Operation, rt acl.ResourceType) bool {
	return a.az == nil || a.az.AuthorizeByResourceType(a.s, op, rt)
}

// peerAccess is whether the call may use a broker-to-broker API: a peer
// broker always; otherwise the access check the API has.
func (b *Broker) peerAccess(c *server.Call, a access) bool {
	return b.sec.IsPeer(c) || a.cluster(acl.ClusterAction)
}

// mayCreate is the auto-creation check (Metadata, Produce): CREATE on the
// cluster (not logged when denied), or else CREATE on the topic.
func (a access) mayCreate(topic string) bool {
	return a.visible(acl.Create, acl.Cluster, acl.ClusterName) || a.topic(acl.Create, topic)
}

// namesOf lists name(item) for each item, for access.topics.
func namesOf[T any](items []T, name func(*T) string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for i := range items {
			if !yield(name(&items[i])) {
				return
			}
		}
	}
}

// configs checks op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
// resource: broker, broker-logger and client-metrics configs are the
// cluster's, a topic's
// its own (Apache's ConfigHelper and configsAuthorizationApiError). It
// returns the error code to answer, 0 when allowed; resource types it
// does not know are left to the handler.
func (a access) configs(op acl.Operation, typ kmsg.ConfigResourceType, name string) int16 {
	switch typ {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !a.cluster(op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeTopic:
		if !a.topic(op, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !a.group(op, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	}
	return 0
}
