package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/auth"
	"kaas/model/slots"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/state/ownership"
)

func init() {
	register(api{key: 10, min: 0, max: 6, serve: serveFindCoordinator, fail: failFindCoordinator})
}

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// serveFindCoordinator serves FindCoordinator (key 10), versions 0–6.
//
// Key type 0 is a consumer group, 1 a transactional id (R-CRD-2); any
// other is INVALID_REQUEST (v6's share-group key type 2 too, as Apache
// answers with share groups off). v5 only lets the broker answer
// TRANSACTION_ABORTABLE (KIP-890), which kaas has no cause to. Both hash onto 50 slots (R-CRD-1); a single
// broker owns every slot, so it answers with itself; in a cluster each
// slot has its own owner (the transaction-state slot's for a
// transactional id, the group-offsets slot's for a group), and a slot
// between owners is COORDINATOR_NOT_AVAILABLE, as Apache answers for a
// coordinator partition without a leader. v4 batches keys, one result
// per key; v0 has no key type (groups only). An empty transactional id is
// INVALID_REQUEST. With the authorizer on: DESCRIBE on the group
// (GROUP_AUTHORIZATION_FAILED) or the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func serveFindCoordinator(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	a := b.sec.Access(c)
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			co := kmsg.NewFindCoordinatorResponseCoordinator()
			co.Key = key
			co.ErrorCode, co.NodeID, co.Host, co.Port = b.findCoordinator(a, req.CoordinatorType, key)
			if co.ErrorCode != 0 {
				co.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(co.ErrorCode).Error())
			}
			resp.Coordinators = append(resp.Coordinators, co)
		}
		return resp
	}
	resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = b.findCoordinator(a, req.CoordinatorType, req.CoordinatorKey)
	if resp.ErrorCode != 0 {
		resp.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(resp.ErrorCode).Error())
	}
	return resp
}

func (b *Broker) findCoordinator(a auth.Access, keyType int8, key string) (code int16, node int32, host string, port int32) {
	switch {
	case keyType == coordinatorGroup && !a.Group(acl.Describe, key):
		return kerr.GroupAuthorizationFailed.Code, -1, "", -1
	case keyType == coordinatorTransaction && !a.TxnID(acl.Describe, key):
		return kerr.TransactionalIDAuthorizationFailed.Code, -1, "", -1
	case keyType != coordinatorGroup && keyType != coordinatorTransaction:
		return kerr.InvalidRequest.Code, -1, "", -1
	case keyType == coordinatorTransaction && key == "":
		return kerr.InvalidRequest.Code, -1, "", -1
	}
	if b.cluster != nil {
		// The owner of the key's slot (cluster_slots.go); between
		// owners, clients ask again.
		unit := ownership.OffsetsSlotUnit(slots.Of(key))
		if keyType == coordinatorTransaction {
			unit = ownership.TxnSlotUnit(slots.Of(key))
		}
		id, ok := b.slotOwner(unit)
		if !ok {
			return kerr.CoordinatorNotAvailable.Code, -1, "", -1
		}
		for _, m := range b.liveBrokers(a.Call().Session().Listener) {
			if m.ID == id {
				return 0, id, m.Host, m.Port
			}
		}
		return kerr.CoordinatorNotAvailable.Code, -1, "", -1
	}
	host, port = b.advertised(a.Call().Session().Listener)
	return 0, b.cfg.BrokerID, host, port
}

func failFindCoordinator(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
	for _, key := range req.CoordinatorKeys {
		co := kmsg.NewFindCoordinatorResponseCoordinator()
		co.Key, co.ErrorCode, co.NodeID, co.Port = key, code, -1, -1
		resp.Coordinators = append(resp.Coordinators, co)
	}
	return resp
}
