package broker

// ApiVersions (key 18), versions 0–3.
//
// The answer is built from the same table the router dispatches on. An
// unsupported ApiVersions version is answered at v0 with
// UNSUPPORTED_VERSION and the list (KIP-511, see UnsupportedVersion); v3
// carries the client's software name, which we only log at debug level.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
)

func init() {
	register(api{key: 18, min: 0, max: 3, serve: serveApiVersions, fail: failApiVersions})
}

func serveApiVersions(_ *Broker, c *server.Call) kmsg.Response {
	if req, ok := c.Request.(*kmsg.ApiVersionsRequest); ok && req.Version >= 3 {
		c.Session().SetClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) // KIP-714 matching
	}
	return apiVersionsResponse()
}

func apiVersionsResponse() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, a := range sortedAPIs() {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

func failApiVersions(_ kmsg.Request, code int16) kmsg.Response {
	resp := apiVersionsResponse()
	resp.ErrorCode = code
	return resp
}
