package broker

// DescribeCluster (key 60), versions 0–1.
//
// One broker, which is also the controller. v1 adds EndpointType (1 =
// brokers); other endpoint types are INVALID_REQUEST, as in Apache. No
// authorization beyond the authorized-operations bit field, which needs
// DESCRIBE on the cluster (0 without it), as Apache's AuthHelper.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 60, min: 0, max: 1, serve: serveDescribeCluster, fail: failDescribeCluster})
}

func serveDescribeCluster(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr("only broker endpoints (type 1) are served")
		return resp
	}
	resp.EndpointType = 1
	resp.ClusterID = b.clusterID
	resp.ControllerID = b.cfg.BrokerID
	br := kmsg.NewDescribeClusterResponseBroker()
	br.NodeID = b.cfg.BrokerID
	br.Host, br.Port = b.advertised(c.Session().Listener)
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{br}
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		a := b.access(c)
		resp.ClusterAuthorizedOperations = 0
		if a.cluster(acl.Describe) {
			resp.ClusterAuthorizedOperations = a.operations(acl.Cluster, acl.ClusterName)
		}
	}
	return resp
}

func failDescribeCluster(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ErrorCode = code
	return resp
}
