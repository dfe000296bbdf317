package broker

// AlterConfigs (key 33), versions 0–2: the legacy, non-incremental form.
//
// Each resource's configs replace its whole dynamic configuration (a
// topic's overrides, or a dynamic broker layer); anything not named goes
// back to its default. Checks and errors are IncrementalAlterConfigs'
// (see 44_incremental_alter_configs.go) with every config a SET.
// Blocking: changes are written durably before the answer.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
)

func init() {
	register(api{key: 33, min: 0, max: 2, blocking: true, serve: serveAlterConfigs, fail: failAlterConfigs})
}

func serveAlterConfigs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	dups := duplicateResources(len(req.Resources), func(i int) string {
		return resourceKey(req.Resources[i].ResourceType, req.Resources[i].ResourceName)
	})
	for _, rr := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		if dups[resourceKey(rr.ResourceType, rr.ResourceName)] {
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Each resource must appear at most once.")
			resp.Resources = append(resp.Resources, out)
			continue
		}
		changes := make([]configChange, 0, len(rr.Configs))
		for _, rc := range rr.Configs {
			changes = append(changes, configChange{name: rc.Name, op: kmsg.IncrementalAlterConfigOpSet, value: rc.Value})
		}
		if err := b.alterResource(rr.ResourceType, rr.ResourceName, changes, true, req.ValidateOnly); err != nil {
			out.ErrorCode, out.ErrorMessage = errCode(err)
			b.log.Info("alter configs rejected", "resource_type", rr.ResourceType, "resource", rr.ResourceName,
				"configs", sortedNames(changes), "error", kerr.ErrorForCode(out.ErrorCode), "reason", err)
		}
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
