package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 30, min: 0, max: 3, blocking: true, serve: serveCreateACLs, fail: failCreateACLs})
}

// serveCreateACLs serves CreateAcls (key 30), versions 0–3.
//
// Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
// creation); with the authorizer off every creation is SECURITY_DISABLED,
// as Apache without an authorizer. Each creation is validated as Apache's
// AclApis and AclControlManager do (INVALID_REQUEST: ANY or UNKNOWN
// values, MATCH patterns, an empty name, a cluster not named
// "kafka-cluster", a principal without a type); the valid ones are
// persisted together before the answer, and adding one that exists is a
// success that changes nothing. As Apache's request parsing, UNKNOWN (0)
// in any enum, or a v0 creation with a non-literal pattern, closes the
// connection. Blocking: the ACL file is written and fsynced.
func serveCreateACLs(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.CreateACLsRequest)
	for _, cr := range req.Creations {
		if cr.ResourceType == 0 || cr.ResourcePatternType == 0 || cr.Operation == 0 || cr.PermissionType == 0 ||
			(req.Version == 0 && cr.ResourcePatternType != acl.Literal) {
			b.log.Warn("closing connection: CreateAcls with UNKNOWN values", "remote", c.Remote, "version", req.Version)
			c.Close()
			return nil
		}
	}
	if code, msg := b.aclAPIAccess(c, acl.Alter); code != 0 {
		return createACLsError(req, code, msg)
	}
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	var valid []acl.Binding
	for i, cr := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		bd := acl.Binding{ResourceType: cr.ResourceType, ResourceName: cr.ResourceName, PatternType: cr.ResourcePatternType,
			Principal: cr.Principal, Host: cr.Host, Operation: cr.Operation, Permission: cr.PermissionType}
		if err := bd.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			continue
		}
		valid = append(valid, bd)
	}
	if len(valid) == 0 {
		return resp
	}
	err := b.sec.AlterACLs(func(a *acl.Authorizer) *acl.Authorizer { return a.Add(valid) })
	if err != nil {
		b.log.Error("persisting ACLs failed", "err", err)
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
			}
		}
		return resp
	}
	b.log.Info("ACLs created", "principal", c.Session().Principal(), "acls", valid)
	return resp
}

// aclAPIAccess is the check every ACL API starts with: op on the cluster
// (Apache's authorizeClusterOperation, which passes with no authorizer),
// then SECURITY_DISABLED when there is no authorizer.
func (b *Broker) aclAPIAccess(c *server.Call, op acl.Operation) (int16, string) {
	a := b.sec.Access(c)
	if !a.Cluster(op) {
		return kerr.ClusterAuthorizationFailed.Code, ""
	}
	if !a.On() {
		return kerr.SecurityDisabled.Code, "No Authorizer is configured."
	}
	return 0, ""
}

func createACLsError(req *kmsg.CreateACLsRequest, code int16, msg string) *kmsg.CreateACLsResponse {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode = code
		if msg != "" {
			r.ErrorMessage = kmsg.StringPtr(msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func failCreateACLs(r kmsg.Request, code int16) kmsg.Response {
	return createACLsError(r.(*kmsg.CreateACLsRequest), code, "")
}
