package broker

// ListConfigResources (key 74), versions 0–1 (KIP-714's
// ListClientMetricsResources, renamed in Kafka 4.1).
//
// Lists the CLIENT_METRICS resources (v0; v1 when asked for type 16 or
// for no type). Other resource types are not listed yet.
//
// With --authorizer: DESCRIBE_CONFIGS on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 74, min: 0, max: 1, serve: serveListConfigResources, fail: failListConfigResources})
}

func serveListConfigResources(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !b.access(c).cluster(acl.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	clientMetrics := int8(kmsg.ConfigResourceTypeClientMetrics)
	if req.Version == 0 || len(req.ResourceTypes) == 0 || slices.Contains(req.ResourceTypes, clientMetrics) {
		for _, name := range b.clientMetricsResources() {
			r := kmsg.NewListConfigResourcesResponseConfigResource()
			r.Name, r.Type = name, clientMetrics
			resp.ConfigResources = append(resp.ConfigResources, r)
		}
	}
	return resp
}

func failListConfigResources(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	resp.ErrorCode = code
	return resp
}
