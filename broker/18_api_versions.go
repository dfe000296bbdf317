package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
)

func init() {
	register(api{key: 18, min: 0, max: 5, serve: serveApiVersions, fail: failApiVersions})
}

// serveApiVersions serves ApiVersions (key 18), versions 0–5.
//
// The answer is built from the same table the router dispatches on. An
// unsupported ApiVersions version is answered at v0 with
// UNSUPPORTED_VERSION and the list (KIP-511, see UnsupportedVersion); v3
// carries the client's software name, which we only log at debug level.
// v3+ list the supported features and the finalized ones with their epoch
// (features.go: transaction.version, KIP-890); v4 is v3 with supported
// features whose minimum is 0 (v3 omits them, KAFKA-17011). v5 (KIP-1242) may name the cluster and node the client means to
// reach: when both are set and either is not this broker's, the answer is
// REBOOTSTRAP_REQUIRED (a connection routed to the wrong broker).
func serveApiVersions(b *Broker, c *server.Call) kmsg.Response {
	resp := b.apiVersionsResponse()
	req := c.Request.(*kmsg.ApiVersionsRequest)
	if req.Version >= 3 {
		b.addFeatures(resp, req.Version)
		c.Session().SetClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) // KIP-714 matching
	}
	if req.Version >= 5 && req.ClusterID != nil && req.NodeID >= 0 &&
		(*req.ClusterID != b.clusterID || req.NodeID != b.cfg.BrokerID) {
		b.log.Info("api versions for another broker: rebootstrap required", "client", c.ClientID, "remote", c.Remote,
			"cluster_id", *req.ClusterID, "node_id", req.NodeID)
		resp.ErrorCode = kerr.RebootstrapRequired.Code
	}
	return resp
}

// apiVersionsResponse lists the table (a nil b: every key).
func (b *Broker) apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, a := range sortedAPIs() {
		if a.single && b != nil && b.cluster != nil {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func failApiVersions(_ kmsg.Request, code int16) kmsg.Response {
	var b *Broker // a panic's answer: every key (a cluster broker refuses the single ones anyway)
	resp := b.apiVersionsResponse()
	resp.ErrorCode = code
	return resp
}
