package broker

import (
	"time"

	"kaas/actors/fence"
	"kaas/messages"
	"kaas/metrics"
	"kaas/model"
)

// startFence starts the fence broadcaster. It applies every fence file to
// the floors before any partition accepts a produce (R-FEN-6), so it
// starts before the topics; it runs on every broker of a cluster, whoever
// coordinates the transactions (coordinators.go).
func (b *Broker) startFence() error {
	var err error
	b.fence, err = fence.Start(b.sys, fence.Config{
		DataDir:      b.cfg.DataDir,
		BrokerID:     b.cfg.BrokerID,
		PollInterval: b.cfg.FencePollInterval,
		Expiration:   b.cfg.TransactionalIDExpiration,
		Floors:       b.floors,
		Metrics:      b.metrics,
		Logger:       b.log,
		Env:          b.env,
	})
	return err
}

// markerWriter delivers the coordinator's markers to local partitions and
// to the group coordinator's pending transactional offsets.
type markerWriter struct{ b *Broker }

func (w markerWriter) WriteMarker(tp model.TopicPartition, m *messages.WriteMarker) bool {
	h := w.b.partition(tp.Topic, tp.Partition)
	if h == nil {
		if w.b.peers != nil && w.b.partitionExists(tp.Topic, tp.Partition) {
			w.b.peers.WriteMarker(tp, m) // led by a peer (or between owners)
			return true
		}
		return false
	}
	if hk := w.b.cfg.testHooks; hk != nil && hk.holdMarker != nil && hk.holdMarker(tp, func() { h.Send(m) }) {
		return true
	}
	h.Send(m)
	return true
}

func (w markerWriter) CompleteTxnOffsets(pid int64, epoch int16, commit bool, groups []string, slots []int32, done func(int16)) {
	w.b.completeTxnOffsets(pid, epoch, commit, groups, slots, done)
}

func (b *Broker) stopFence() {
	if b.fence != nil {
		b.fence.Stop()
	}
}

// txnLogObserver feeds the transaction state writer's slot fsyncs into
// the metrics.
type txnLogObserver struct{ m *metrics.Metrics }

func (o txnLogObserver) Synced(d time.Duration, appends int) {
	o.m.TxnLogFsyncDuration.Observe(d.Seconds())
	o.m.TxnLogGroupCommitSizes.Observe(float64(appends))
}
