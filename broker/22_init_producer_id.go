package broker

// InitProducerId (key 22), versions 0–4 (spec init-producer-id.md).
//
// v3+ carries the caller's claimed identity (ProducerId, ProducerEpoch):
// exactly one of them -1 is INVALID_REQUEST on every path (R-IPI-2). With a
// null TransactionalId this is the idempotent path (R-IPI-3): a fresh
// producer id at epoch 0, no coordinator, any claim ignored, no timeout
// check. Errors answer producer id -1, epoch -1 (R-IPI-7).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/net/server"
)

func init() {
	register(api{key: 22, min: 0, max: 4, blocking: true, serve: serveInitProducerID, fail: failInitProducerID})
}

func serveInitProducerID(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.Version >= 3 && (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	if req.TransactionalID == nil {
		pid, err := b.pids.Next()
		if err != nil {
			b.log.Error("allocating a producer id", "err", err)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
		resp.ProducerID, resp.ProducerEpoch = pid, 0
		return resp
	}
	return b.initTransactionalProducer(req, resp)
}

func failInitProducerID(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
	return resp
}
