package partition

import (
	"sort"

	"kaas/messages"
	"kaas/state/producers"
)

// describeProducers answers the DescribeProducers API from producer state.
func (p *Partition) describeProducers(m *messages.DescribeProducers) {
	var out []messages.ActiveProducer
	p.producers.EachEffective(func(pid int64, e *producers.Entry) {
		out = append(out, messages.ActiveProducer{
			ProducerID: pid, ProducerEpoch: e.Epoch, LastSequence: e.LastSeq(),
			LastTimestamp: e.LastTimestamp, CoordinatorEpoch: e.CoordinatorEpoch,
			CurrentTxnStartOffset: e.TxnFirstOffset,
		})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	m.Reply(out)
}
