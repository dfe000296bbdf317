package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/messages"
	"kaas/net/server"
	"kaas/state/acl"
)

func init() {
	// blocking: a fresh producer id may persist a new id block (a write,
	// an fsync, a rename and a directory fsync every 1,000 ids, with the
	// allocator's lock held), which must not hold up the event loop. The
	// transactional path only routes to the coordinator's actors.
	register(api{key: 22, min: 0, max: 5, blocking: true, serve: serveInitProducerID, fail: failInitProducerID})
}

// serveInitProducerID serves InitProducerId (key 22), versions 0–5 (spec
// init-producer-id.md; v5 only lets the broker answer
// TRANSACTION_ABORTABLE, KIP-890, which kaas has no cause to).
//
// v3+ carries the caller's claimed identity (ProducerId, ProducerEpoch):
// exactly one of them -1 is INVALID_REQUEST on every path (R-IPI-2). With a
// null TransactionalId this is the idempotent path (R-IPI-3): a fresh
// producer id at epoch 0, no coordinator, any claim ignored, no timeout
// check. Errors answer producer id -1, epoch -1 (R-IPI-7).
//
// With a TransactionalId: "" is INVALID_REQUEST, a timeout outside
// (0, transaction.max.timeout.ms] is INVALID_TRANSACTION_TIMEOUT (before
// any ownership check), then the id's coordinator actor bumps the epoch
// (KIP-360), rotates an exhausted one, or aborts an ongoing transaction
// and answers CONCURRENT_TRANSACTIONS. PRODUCER_FENCED is sent from v4;
// v0–3 get INVALID_PRODUCER_EPOCH (R-GEN-2).
//
// With --authorizer: first of all (R-IPI-1), WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), or for an idempotent producer
// IDEMPOTENT_WRITE on the cluster or WRITE on any topic
// (CLUSTER_AUTHORIZATION_FAILED).
func serveInitProducerID(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	// R-IPI-1 step 1, before the claim's shape: a transactional id needs
	// WRITE on it; an idempotent producer IDEMPOTENT_WRITE on the cluster
	// or WRITE on at least one topic (KIP-679).
	a := b.sec.Access(c)
	if req.TransactionalID != nil && !a.TxnID(acl.Write, *req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp
	}
	if req.TransactionalID == nil && !a.Visible(acl.IdempotentWrite, acl.Cluster, acl.ClusterName) && !a.ByResourceType(acl.Write, acl.Topic) {
		a.Cluster(acl.IdempotentWrite) // logged and counted as the denial
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if req.Version >= 3 && (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if req.TransactionalID == nil {
		// The allocator may persist a new block: this runs off the event
		// loop (blocking).
		pid, err := b.pids.Next()
		if err != nil {
			b.log.Error("allocating a producer id", "err", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = pid, 0
		return resp
	}
	switch timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond; {
	case *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case req.TransactionTimeoutMillis <= 0 || timeout > b.cfg.TxnMaxTimeout:
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return resp
	}
	txns := b.txnsFor(*req.TransactionalID)
	if txns == nil {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}
	txns.InitProducerID(*req.TransactionalID, &messages.InitProducerID{
		TimeoutMs:     req.TransactionTimeoutMillis,
		HasClaim:      req.Version >= 3 && req.ProducerID != -1,
		ProducerID:    req.ProducerID,
		ProducerEpoch: req.ProducerEpoch,
		Reply: func(code int16, pid int64, epoch int16) {
			resp.ErrorCode = fencedForVersion(code, req.Version >= 4)
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
			c.Reply(resp)
		},
	})
	return nil
}

// fencedForVersion maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for the
// API versions that predate it (R-GEN-2).
func fencedForVersion(code int16, knowsFenced bool) int16 {
	if code == kerr.ProducerFenced.Code && !knowsFenced {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

func failInitProducerID(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
