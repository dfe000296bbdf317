package broker

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sasl"
)

func init() {
	register(api{key: 50, min: 0, max: 0, serve: serveDescribeUserSCRAM, fail: failDescribeUserSCRAM})
}

// serveDescribeUserSCRAM serves DescribeUserScramCredentials (key 50),
// version 0 (KIP-554).
//
// Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED at the top
// and for every user named). A null or empty user list describes every
// user; a named user without credentials is RESOURCE_NOT_FOUND, a name
// given twice DUPLICATE_RESOURCE (Apache's ScramImage.describe). Only the
// mechanism and iteration count are ever told, never salts or keys.
func serveDescribeUserSCRAM(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	if !b.sec.Access(c).Cluster(acl.Describe) {
		return failDescribeUserSCRAM(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	users := b.sec.Users()
	var names []string
	dup := map[string]bool{}
	if len(req.Users) == 0 {
		for u := range users {
			names = append(names, u)
		}
		sort.Strings(names)
	} else {
		seen := map[string]bool{}
		for _, u := range req.Users {
			if seen[u.Name] {
				dup[u.Name] = true
				continue
			}
			seen[u.Name] = true
			names = append(names, u.Name)
		}
	}
	for _, name := range names {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		switch creds := users[name]; {
		case dup[name]:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + name)
		case len(creds) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + name)
		default:
			for _, code := range []int8{1, 2} {
				if cred, ok := creds[sasl.ScramMechanisms[code]]; ok {
					ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					ci.Mechanism, ci.Iterations = code, int32(cred.Iterations)
					r.CredentialInfos = append(r.CredentialInfos, ci)
				}
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func failDescribeUserSCRAM(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	msg := kmsg.StringPtr(kerr.ErrorForCode(code).(*kerr.Error).Description)
	resp.ErrorCode, resp.ErrorMessage = code, msg
	for range req.Users {
		rr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		rr.ErrorCode, rr.ErrorMessage = code, msg
		resp.Results = append(resp.Results, rr)
	}
	return resp
}
