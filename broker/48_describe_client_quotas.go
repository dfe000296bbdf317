package broker

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/quota"
)

func init() {
	register(api{key: 48, min: 0, max: 1, serve: serveDescribeClientQuotas, fail: failDescribeClientQuotas})
}

// serveDescribeClientQuotas serves DescribeClientQuotas (key 48), versions
// 0–1.
//
// Lists the quota entities matching the filter and their values, as
// Apache 4's ClientQuotasImage.describe: each component matches an exact
// name, the default (MATCH_TYPE_DEFAULT) or any entity of its type
// (MATCH_TYPE_SPECIFIED); strict asks for entities with no other
// component. A malformed filter is INVALID_REQUEST, an entity type other
// than user, client-id and ip UNSUPPORTED_VERSION, each with Apache's
// message. Answers from memory (the quotas every alteration publishes).
//
// With --authorizer: DESCRIBE_CONFIGS on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED.
func serveDescribeClientQuotas(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !b.sec.Access(c).Cluster(acl.DescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	comps := make([]quota.FilterComponent, len(req.Components))
	for i, rc := range req.Components {
		comps[i] = quota.FilterComponent{Type: rc.EntityType, MatchType: int8(rc.MatchType), Match: rc.Match}
	}
	entries, err := b.quotas.cfg.Load().Describe(comps, req.Strict)
	if err != nil {
		var fe *quota.FilterError
		resp.ErrorCode = kerr.InvalidRequest.Code
		if errors.As(err, &fe) && fe.Unsupported {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
		}
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		b.log.Info("describe client quotas rejected", "client", c.ClientID, "error", kerr.ErrorForCode(resp.ErrorCode), "reason", err)
		return resp
	}
	for _, e := range entries {
		out := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, comp := range e.Entity.Components() {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = comp.Type, comp.Name
			out.Entity = append(out.Entity, ent)
		}
		for _, k := range slices.Sorted(maps.Keys(e.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, e.Values[k]
			out.Values = append(out.Values, v)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp
}

func failDescribeClientQuotas(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.ErrorCode = code
	return resp
}
