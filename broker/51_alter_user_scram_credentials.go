package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/sasl"
	"kaas/storage/authstore"
)

func init() {
	register(api{key: 51, min: 0, max: 0, blocking: true, serve: serveAlterUserSCRAM, fail: failAlterUserSCRAM})
}

type scramChange struct {
	user, mechanism string
	cred            *authstore.Credential // nil: delete
}

// serveAlterUserSCRAM serves AlterUserScramCredentials (key 51), version 0
// (KIP-554).
//
// Needs ALTER on the cluster. Clients send a salt and a salted password
// (never the password); the broker keeps salt, iterations, StoredKey and
// ServerKey. Validation as Apache's ScramControlManager: an empty name or
// iterations outside 4096–16384 → UNACCEPTABLE_CREDENTIAL, an unknown
// mechanism → UNSUPPORTED_SASL_MECHANISM, deleting what does not exist →
// RESOURCE_NOT_FOUND, a user altered twice in one request (any mechanism)
// → DUPLICATE_RESOURCE. Every accepted change is persisted in one durable
// write before the answer; connections already authenticated keep their
// session. Blocking: the credential file is written and fsynced.
func serveAlterUserSCRAM(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if !b.sec.Access(c).Cluster(acl.Alter) {
		return failAlterUserSCRAM(req, kerr.ClusterAuthorizationFailed.Code)
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	current := b.sec.Users()
	errs := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	var order []string // users with an error, in request order
	fail := func(user string, code int16, msg string) {
		if errs[user] == nil {
			order = append(order, user)
		}
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode, r.ErrorMessage = user, code, kmsg.StringPtr(msg)
		errs[user] = &r
	}
	pending := map[string]int{} // user → index in changes
	var changes []scramChange
	touch := func(user string) bool {
		if errs[user] != nil {
			return false
		}
		if i, dup := pending[user]; dup {
			changes[i].user = "" // dropped
			fail(user, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
			return false
		}
		return true
	}
	for _, d := range req.Deletions {
		if !touch(d.Name) {
			continue
		}
		mech := sasl.ScramMechanisms[d.Mechanism]
		switch {
		case d.Name == "":
			fail(d.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			fail(d.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case current[d.Name][mech].Iterations == 0:
			fail(d.Name, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
		default:
			pending[d.Name] = len(changes)
			changes = append(changes, scramChange{user: d.Name, mechanism: mech})
		}
	}
	for _, u := range req.Upsertions {
		if !touch(u.Name) {
			continue
		}
		mech := sasl.ScramMechanisms[u.Mechanism]
		switch {
		case u.Name == "":
			fail(u.Name, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case mech == "":
			fail(u.Name, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case u.Iterations < sasl.MinIterations:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too few iterations")
		case u.Iterations > sasl.MaxIterations:
			fail(u.Name, kerr.UnacceptableCredential.Code, "Too many iterations")
		default:
			cred, err := sasl.CredentialFromSalted(mech, u.Salt, int(u.Iterations), u.SaltedPassword)
			if err != nil {
				fail(u.Name, kerr.UnacceptableCredential.Code, err.Error())
				continue
			}
			pending[u.Name] = len(changes)
			stored := authstore.Credential(cred)
			changes = append(changes, scramChange{user: u.Name, mechanism: mech, cred: &stored})
		}
	}
	var applied []scramChange
	for _, ch := range changes {
		if ch.user != "" {
			applied = append(applied, ch)
		}
	}
	err := b.sec.AlterUsers(func(users authstore.Users) bool {
		for _, ch := range applied {
			if ch.cred == nil {
				delete(users[ch.user], ch.mechanism)
				if len(users[ch.user]) == 0 {
					delete(users, ch.user)
				}
				continue
			}
			if users[ch.user] == nil {
				users[ch.user] = map[string]authstore.Credential{}
			}
			users[ch.user][ch.mechanism] = *ch.cred
		}
		return len(applied) > 0
	})
	for _, ch := range applied {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = ch.user
		if err != nil {
			r.ErrorCode, r.ErrorMessage = kerr.KafkaStorageError.Code, kmsg.StringPtr(err.Error())
		}
		resp.Results = append(resp.Results, r)
	}
	for _, user := range order {
		resp.Results = append(resp.Results, *errs[user])
	}
	if err != nil {
		b.log.Error("persisting SCRAM credentials failed", "err", err)
	} else if len(applied) > 0 {
		b.log.Info("SCRAM credentials altered", "principal", c.Session().Principal(), "changes", len(applied))
	}
	return resp
}

func failAlterUserSCRAM(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	var users []string
	for _, d := range req.Deletions {
		users = append(users, d.Name)
	}
	for _, u := range req.Upsertions {
		users = append(users, u.Name)
	}
	msg := kmsg.StringPtr(kerr.ErrorForCode(code).(*kerr.Error).Description)
	for _, u := range users {
		if seen[u] {
			continue
		}
		seen[u] = true
		rr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		rr.User, rr.ErrorCode, rr.ErrorMessage = u, code, msg
		resp.Results = append(resp.Results, rr)
	}
	return resp
}
