package broker

import (
	"errors"
	"time"

	"kaas/actors/fence"
	"kaas/actors/txn"
	"kaas/actors/txnwriter"
	"kaas/messages"
	"kaas/metrics"
	"kaas/storage/txnlog"
)

// startTransactions opens the coordinator store and the fence broadcaster.
// The broadcaster applies every fence file to the floors before any
// partition accepts a produce (R-FEN-6), so it starts before the topics.
func (b *Broker) startTransactions() error {
	var err error
	cenv := b.env
	cenv.DataDir = b.coordinatorDataDir()
	if b.txnStore, err = txnlog.Open(cenv); err != nil {
		return err
	}
	if b.txnWriter, err = txnwriter.Start(b.sys, b.txnStore, txnLogObserver{b.metrics}, b.log); err != nil {
		b.txnStore.Close()
		return err
	}
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
	if err != nil {
		return err
	}
	b.txns = txn.New(b.sys, txn.Config{
		Store:         b.txnWriter,
		PIDs:          b.pids,
		Fencer:        b.fence,
		Markers:       markerWriter{b},
		AbortInterval: b.cfg.TxnAbortInterval,
		Expiration:    b.cfg.TransactionalIDExpiration,
		Metrics:       b.metrics,
		Logger:        b.log,
	})
	return nil
}

// markerWriter delivers the coordinator's markers to local partitions and
// to the group coordinator's pending transactional offsets.
type markerWriter struct{ b *Broker }

func (w markerWriter) WriteMarker(tp txnlog.TopicPartition, m *messages.WriteMarker) bool {
	h := w.b.partition(tp.Topic, tp.Partition)
	if h == nil {
		return false
	}
	if hk := w.b.cfg.testHooks; hk != nil && hk.holdMarker != nil && hk.holdMarker(tp, func() { h.Send(m) }) {
		return true
	}
	h.Send(m)
	return true
}

func (w markerWriter) CompleteTxnOffsets(pid int64, epoch int16, commit bool, groups []string, done func(int16)) {
	w.b.completeTxnOffsets(pid, epoch, commit, groups, done)
}

func (b *Broker) stopTransactions() error {
	if b.txns != nil {
		b.txns.Stop()
	}
	if b.fence != nil {
		b.fence.Stop()
	}
	// After the coordinator: no transition is still on its way.
	var errs []error
	if b.txnWriter != nil {
		errs = append(errs, b.txnWriter.Stop())
	} else if b.txnStore != nil {
		errs = append(errs, b.txnStore.Close())
	}
	return errors.Join(errs...)
}

// txnLogObserver feeds the transaction state writer's fsync rounds into
// the metrics.
type txnLogObserver struct{ m *metrics.Metrics }

func (o txnLogObserver) Synced(d time.Duration, appends int) {
	o.m.TxnLogFsyncDuration.Observe(d.Seconds())
	o.m.TxnLogGroupCommitSizes.Observe(float64(appends))
}
