package partition

import "sync/atomic"

// publishedStats is what a partition publishes beside its log view for
// metrics and the inspector, stored by the actor whenever it publishes a
// view and read by anyone.
type publishedStats struct {
	producerIDs atomic.Int64
}

// ProducerIDs is the number of producer ids with state on the partition,
// as of its last published view.
func (h *Handle) ProducerIDs() int { return int(h.stats.producerIDs.Load()) }
