package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initTransactionalProducer is the transactional InitProducerId path.
// TODO(issue 3): the transaction coordinator.
func (b *Broker) initTransactionalProducer(_ *kmsg.InitProducerIDRequest, resp *kmsg.InitProducerIDResponse) kmsg.Response {
	resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	return resp
}
