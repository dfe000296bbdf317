package broker

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 74, min: 0, max: 1, serve: serveListConfigResources, fail: failListConfigResources})
}

// The config resource types ListConfigResources knows, in Apache's order.
var listableConfigResources = []kmsg.ConfigResourceType{
	kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger,
	kmsg.ConfigResourceTypeClientMetrics,
	kmsg.ConfigResourceTypeGroupConfig,
}

// serveListConfigResources serves ListConfigResources (key 74), versions
// 0–1 (v0 was ListClientMetricsResources, KIP-714; v1 lists any kind,
// KIP-1142).
//
// v0 lists the client-metrics resources (subscriptions made with
// IncrementalAlterConfigs, client_metrics.go). v1 lists the resources of
// the types asked (none asked: every supported one, as Apache): topics
// (2: every topic, internal ones too), brokers (4: the live broker ids),
// broker loggers (8: none, kaas has no dynamic loggers), client metrics
// (16) and groups (32: those with group configs). Any other type
// is UNSUPPORTED_VERSION, as Apache.
//
// ACL: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
func serveListConfigResources(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !b.sec.Access(c).Cluster(acl.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	resp.ConfigResources = []kmsg.ListConfigResourcesResponseConfigResource{}
	types := listableConfigResources
	if req.Version == 0 {
		types = []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeClientMetrics}
	}
	if len(req.ResourceTypes) > 0 {
		types = nil
		for _, rt := range req.ResourceTypes {
			known := false
			for _, t := range listableConfigResources {
				known = known || int8(t) == rt
			}
			if !known {
				b.log.Info("list config resources: unsupported resource type", "type", rt)
				resp.ErrorCode = kerr.UnsupportedVersion.Code
				return resp
			}
			types = append(types, kmsg.ConfigResourceType(rt))
		}
	}
	add := func(typ kmsg.ConfigResourceType, name string) {
		r := kmsg.NewListConfigResourcesResponseConfigResource()
		r.Name, r.Type = name, int8(typ)
		resp.ConfigResources = append(resp.ConfigResources, r)
	}
	for _, typ := range types {
		switch typ {
		case kmsg.ConfigResourceTypeTopic:
			for _, t := range sortedTopics(b.topics.load()) {
				add(typ, t.meta.Name)
			}
			for _, it := range sortedInternalTopics() {
				add(typ, it.name)
			}
		case kmsg.ConfigResourceTypeBroker:
			for _, m := range b.liveBrokers("") {
				add(typ, strconv.Itoa(int(m.ID)))
			}
		case kmsg.ConfigResourceTypeClientMetrics:
			for _, name := range b.clientMetricsResources() {
				add(typ, name)
			}
		case kmsg.ConfigResourceTypeGroupConfig:
			for _, name := range b.groupConfigResources() {
				add(typ, name)
			}
		}
	}
	return resp
}

func failListConfigResources(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	resp.ErrorCode = code
	return resp
}
