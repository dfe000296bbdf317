package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
)

func init() {
	register(api{key: 33, min: 0, max: 2, blocking: true, serve: serveAlterConfigs, fail: failAlterConfigs})
}

// serveAlterConfigs serves AlterConfigs (key 33), versions 0–2: the legacy,
// non-incremental form.
//
// Each resource's configs replace its whole dynamic configuration (a
// topic's overrides, or a dynamic broker layer); anything not named goes
// back to its default. Checks and errors are IncrementalAlterConfigs'
// (see 44_incremental_alter_configs.go) with every config a SET.
// Blocking: changes are written durably before the answer.
//
// With --authorizer: ALTER_CONFIGS on the cluster or the topic, as
// DescribeConfigs.
func serveAlterConfigs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	reqs := make([]alterRequest, len(req.Resources))
	for i, rr := range req.Resources {
		reqs[i] = alterRequest{typ: rr.ResourceType, name: rr.ResourceName}
		for _, rc := range rr.Configs {
			reqs[i].changes = append(reqs[i].changes, configChange{name: rc.Name, op: kmsg.IncrementalAlterConfigOpSet, value: rc.Value})
		}
	}
	codes, msgs := b.alterAll(b.sec.Access(c), "alter configs", reqs, true, req.ValidateOnly)
	for i, rr := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		out.ErrorCode, out.ErrorMessage = codes[i], msgs[i]
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}

func failAlterConfigs(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName, out.ErrorCode = rr.ResourceType, rr.ResourceName, code
		resp.Resources = append(resp.Resources, out)
	}
	return resp
}
