package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 25, min: 0, max: 4, serve: serveAddOffsetsToTxn, fail: failAddOffsetsToTxn})
}

// serveAddOffsetsToTxn serves AddOffsetsToTxn (key 25), versions 0–4
// (R-TXN-6; v4 only lets the broker answer TRANSACTION_ABORTABLE, KIP-890).
//
// Adds the group's offsets partition ("__consumer_offsets",
// slot(GroupId)) to the transaction, with AddPartitionsToTxn's checks.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for v0–1 (R-GEN-2). An empty
// GroupId is accepted, as in Apache; TxnOffsetCommit rejects it.
//
// With --authorizer: WRITE on the transactional id, then READ on the group.
func serveAddOffsetsToTxn(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	a := b.sec.Access(c)
	if !a.TxnID(acl.Write, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	if !a.Group(acl.Read, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	if req.TransactionalID == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	txns := b.txnsFor(req.TransactionalID)
	if txns == nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	txns.AddOffsets(req.TransactionalID, &messages.AddOffsetsToTxn{
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Group: req.Group,
		Reply: func(code int16) {
			resp.ErrorCode = fencedForVersion(code, req.Version >= 2)
			c.Reply(resp)
		},
	})
	return nil
}

func failAddOffsetsToTxn(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = code
	return resp
}
