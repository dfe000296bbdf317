package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 29, min: 0, max: 3, serve: serveDescribeACLs, fail: failDescribeACLs})
}

// serveDescribeACLs serves DescribeAcls (key 29), versions 0–3.
//
// Needs DESCRIBE on the cluster; SECURITY_DISABLED with the authorizer
// off. The filter selects as Apache's AclBindingFilter (MATCH also lists
// the wildcard and every prefixed pattern covering the name); bindings
// are grouped by resource pattern. A v0 filter's ANY pattern means
// LITERAL; UNKNOWN (0) anywhere, or another v0 pattern, closes the
// connection as Apache's request parsing does.
func serveDescribeACLs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeACLsRequest)
	f := acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType}
	if !normalizeFilter(&f, req.Version) {
		b.log.Warn("closing connection: DescribeAcls with an UNKNOWN filter", "remote", c.Remote, "version", req.Version)
		c.Close()
		return nil
	}
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code, msg := b.aclAPIAccess(c, acl.Describe); code != 0 {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	for _, bd := range b.sec.Authorizer().Find(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != bd.ResourceType || resp.Resources[n-1].ResourceName != bd.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != bd.PatternType {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = bd.ResourceType, bd.ResourceName, bd.PatternType
			resp.Resources = append(resp.Resources, r)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = bd.Principal, bd.Host, bd.Operation, bd.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	return resp
}

// normalizeFilter applies Apache's Describe/DeleteAclsRequest parsing
// rules: a v0 ANY pattern is LITERAL, any other v0 pattern and UNKNOWN
// values are refused.
func normalizeFilter(f *acl.Filter, version int16) bool {
	if version == 0 {
		if f.PatternType == acl.AnyType {
			f.PatternType = acl.Literal
		} else if f.PatternType != acl.Literal {
			return false
		}
	}
	return f.PatternType != 0 && f.ResourceType != 0 && f.Operation != 0 && f.Permission != 0
}

func failDescribeACLs(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode = code
	return resp
}
