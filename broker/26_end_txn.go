package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	register(api{key: 26, min: 0, max: 5, serve: serveEndTxn, fail: failEndTxn})
}

// serveEndTxn serves EndTxn (key 26), versions 0–5 (R-TXN-7; v4 only lets
// the broker answer TRANSACTION_ABORTABLE, KIP-890; v5 is transaction
// version 2's, R-TV2-2..4).
//
// v5 (a TV2 client): every end bumps the producer epoch, the markers carry
// the bumped epoch, and the answer carries the producer id and epoch to go
// on with — a fresh producer id at epoch 0 once the epoch is exhausted; a
// retry is answered NONE with the current ones; an abort with nothing in
// the transaction is allowed (and bumps). Errors carry -1 and -1.
//
// Commit or abort: the coordinator persists PrepareCommit/PrepareAbort,
// writes a marker to every partition and waits until each is durable,
// persists CompleteCommit/CompleteAbort, then answers (answering after the
// markers conforms; the client's next transaction then never meets a
// Prepare* entry). Retries of a completed transaction in its direction
// answer NONE, the other direction INVALID_TXN_STATE.
// PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for v0–1 (R-GEN-2).
//
// With --authorizer: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func serveEndTxn(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !b.sec.Access(c).TxnID(acl.Write, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
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
	txns.EndTxn(req.TransactionalID, &messages.EndTxn{
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Commit: req.Commit, TV2: req.Version >= 5,
		Reply: func(code int16, pid int64, epoch int16) {
			resp.ErrorCode = fencedForVersion(code, req.Version >= 2)
			resp.ProducerID, resp.ProducerEpoch = -1, -1
			if code == 0 {
				resp.ProducerID, resp.ProducerEpoch = pid, epoch
			}
			c.Reply(resp)
		},
	})
	return nil
}

func failEndTxn(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = code
	return resp
}
