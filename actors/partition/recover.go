package partition

import (
	"errors"
	"io/fs"
	"math"
	"path/filepath"

	"kaas/state/producers"
	"kaas/storage/durable"
	"kaas/storage/partlog"
	"kaas/storage/producersnap"
	"kaas/storage/vfs"
)

// recoverProducers rebuilds producer state (R-PV-15): the snapshot, then
// every batch after the offset it covers, in log order. A missing, corrupt
// or too new snapshot means a replay of the whole log (the snapshot is
// derived data: it is rebuilt, never a reason to refuse a start). ABORT
// markers whose .txnindex entry did not survive a crash are indexed again.
func (p *Partition) recoverProducers() error {
	path := filepath.Join(p.cfg.Dir, producersnap.FileName)
	view := p.log.View()
	end := p.log.EndOffset()
	from, err := p.loadSnapshot(path)
	if err != nil || from > end {
		if err != nil {
			p.logger().Warn("ignoring producer state snapshot; replaying the log", "err", err)
		} else {
			p.logger().Warn("producer state snapshot is past the log end; replaying the log", "snapshot_offset", from, "log_end", end)
		}
		p.producers.Reset()
		from = 0
	}
	indexed := make(map[int64]bool)
	for _, a := range view.AbortedTxns(from, math.MaxInt64) {
		indexed[a.LastOffset] = true
	}
	var replayErr error
	err = view.ForEachBatch(from, end, func(batch []byte) bool {
		h, err := partlog.ParseBatchHeader(batch)
		if err != nil {
			replayErr = err
			return false
		}
		switch {
		case h.IsControl():
			commit, coordinatorEpoch, err := partlog.ParseMarker(batch)
			if err != nil {
				return true
			}
			if indexed[h.BaseOffset] {
				p.producers.ApplyMarker(h.ProducerID, h.ProducerEpoch, coordinatorEpoch, h.BaseOffset, h.MaxTimestamp)
			} else {
				p.settleMarker(h, commit, coordinatorEpoch)
			}
		case h.HasProducerID():
			p.producers.Apply(producerBatch(h))
		}
		return true
	})
	if err != nil {
		return err
	}
	p.unsettled = nil // everything recovered is durable
	p.producers.Each(func(pid int64, e *producers.Entry) {
		if e.HasOpenTxn() {
			if p.recoveredTxns == nil {
				p.recoveredTxns = make(map[int64]bool)
			}
			p.recoveredTxns[pid] = true
		}
	})
	return replayErr
}

// loadSnapshot restores the producer snapshot at path; a missing file
// covers nothing (offset 0).
func (p *Partition) loadSnapshot(path string) (int64, error) {
	b, err := vfs.ReadFile(p.cfg.Env.FS, path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return restoreSnapshot(p.producers, b)
}

// saveSnapshot writes the producer state as of the log end durably.
func (p *Partition) saveSnapshot() error {
	b, err := encodeSnapshot(p.producers, p.log.EndOffset())
	if err != nil {
		return err
	}
	return durable.WriteFile(p.cfg.Env.FS, filepath.Join(p.cfg.Dir, producersnap.FileName), b)
}
