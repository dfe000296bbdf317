package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
)

func init() {
	register(api{key: 44, min: 0, max: 1, blocking: true, serve: serveIncrementalAlterConfigs, fail: failIncrementalAlterConfigs})
}

// serveIncrementalAlterConfigs serves IncrementalAlterConfigs (key 44),
// versions 0–1.
//
// Per config: SET, DELETE, APPEND and SUBTRACT (LIST configs only). Topic
// resources change the topic's overrides, persisted in its metadata file
// and pushed to its partition actors; broker resources change a dynamic
// layer — this broker's (named by its id) or the cluster-wide default
// (empty name) — persisted under <data>/__cluster/configs and applied to
// every topic without an override; group resources (32) change a group's
// configs (group_configs.go, INVALID_CONFIG for what does not validate).
// Per-resource errors as Apache 3.7:
// a resource named twice, a config named twice in one resource, a null
// value for SET/APPEND/SUBTRACT, another broker's id, an unknown resource
// type → INVALID_REQUEST; APPEND/SUBTRACT on a non-list, an unknown topic
// config or a bad value → INVALID_CONFIG (cleanup.policy=compact too: not
// supported yet); an unknown topic → UNKNOWN_TOPIC_OR_PARTITION; a broker
// config that is not dynamic or a bad broker value → INVALID_REQUEST.
// validate_only checks everything and changes nothing. Blocking: changes
// are written durably before the answer.
//
// With --authorizer: ALTER_CONFIGS on the cluster, the topic or the group, as
// DescribeConfigs.
func serveIncrementalAlterConfigs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	reqs := make([]alterRequest, len(req.Resources))
	for i, rr := range req.Resources {
		reqs[i] = alterRequest{typ: rr.ResourceType, name: rr.ResourceName}
		for _, rc := range rr.Configs {
			reqs[i].changes = append(reqs[i].changes, configChange{name: rc.Name, op: rc.Op, value: rc.Value})
		}
	}
	codes, msgs := b.alterAll(b.sec.Access(c), "incremental alter configs", reqs, false, req.ValidateOnly)
	for i, rr := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		out.ErrorCode, out.ErrorMessage = codes[i], msgs[i]
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

func failIncrementalAlterConfigs(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName, out.ErrorCode = rr.ResourceType, rr.ResourceName, code
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
