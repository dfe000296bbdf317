package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 60, min: 0, max: 2, serve: serveDescribeCluster, fail: failDescribeCluster})
}

// serveDescribeCluster serves DescribeCluster (key 60), versions 0–2.
//
// The live brokers (one in single-broker mode); the controller is the
// lowest live id. v1 adds EndpointType (1 = brokers); other endpoint
// types are INVALID_REQUEST, as in Apache. v2 (KIP-1073) may ask for
// fenced brokers too: kaas has none (a broker is a member while its lease
// lives), so every broker is unfenced. No authorization beyond the
// authorized-operations bit field, which needs DESCRIBE on the cluster (0
// without it), as Apache's AuthHelper.
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
	resp.ControllerID = b.controllerID()
	for _, m := range b.liveBrokers(c.Session().Listener) {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = m.ID, m.Host, m.Port
		if m.Rack != "" {
			rack := m.Rack
			br.Rack = &rack
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterAuthorizedOperations = -2147483648
	if req.IncludeClusterAuthorizedOperations {
		a := b.sec.Access(c)
		resp.ClusterAuthorizedOperations = 0
		if a.Cluster(acl.Describe) {
			resp.ClusterAuthorizedOperations = a.Operations(acl.Cluster, acl.ClusterName)
		}
	}
	return resp
}

func failDescribeCluster(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.ErrorCode = code
	return resp
}
