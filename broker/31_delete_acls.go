package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 31, min: 0, max: 3, blocking: true, serve: serveDeleteACLs, fail: failDeleteACLs})
}

// serveDeleteACLs serves DeleteAcls (key 31), versions 0–3.
//
// Needs ALTER on the cluster; SECURITY_DISABLED with the authorizer off.
// Every filter reports every binding it matched (a binding two filters
// match is reported by both, as Apache's StandardAuthorizer); an invalid
// filter gets INVALID_REQUEST. All removals are persisted together before
// the answer. Filter parsing as DescribeAcls. Blocking: the ACL file is
// written and fsynced.
func serveDeleteACLs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DeleteACLsRequest)
	filters := make([]acl.Filter, len(req.Filters))
	for i, rf := range req.Filters {
		filters[i] = acl.Filter{ResourceType: rf.ResourceType, ResourceName: rf.ResourceName, PatternType: rf.ResourcePatternType,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType}
		if !normalizeFilter(&filters[i], req.Version) {
			b.log.Warn("closing connection: DeleteAcls with an UNKNOWN filter", "remote", c.Remote, "version", req.Version)
			c.Close()
			return nil
		}
	}
	if code, msg := b.aclAPIAccess(c, acl.Alter); code != 0 {
		return deleteACLsError(req, code, msg)
	}
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(filters))
	var valid []acl.Filter
	var slots []int
	for i, f := range filters {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
		if err := f.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid, slots = append(valid, f), append(slots, i)
	}
	var matched [][]acl.Binding
	err := b.sec.AlterACLs(func(a *acl.Authorizer) *acl.Authorizer {
		next, m := a.Remove(valid)
		matched = m
		if len(next.ACLs()) == len(a.ACLs()) {
			return a // nothing to persist
		}
		return next
	})
	if err != nil {
		b.log.Error("persisting ACLs failed", "err", err)
		for _, i := range slots {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
		}
		return resp
	}
	var gone []acl.Binding
	for j, i := range slots {
		for _, bd := range matched[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
			gone = append(gone, bd)
		}
	}
	if len(gone) > 0 {
		b.log.Info("ACLs deleted", "principal", c.Session().Principal(), "acls", gone)
	}
	return resp
}

func deleteACLsError(req *kmsg.DeleteACLsRequest, code int16, msg string) *kmsg.DeleteACLsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode = code
		if msg != "" {
			r.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func failDeleteACLs(r kmsg.Request, code int16) kmsg.Response {
	return deleteACLsError(r.(*kmsg.DeleteACLsRequest), code, "")
}
