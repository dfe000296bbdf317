package partlog

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

// The leader-epoch cache on disk (leader-epoch-checkpoint, Apache's name
// and format), and how it stays in agreement with the log:
//
//   - It is written (tmp + fsync + rename + directory fsync) before the
//     first batch of a new epoch is appended, so an epoch with data in
//     the log always has its entry on disk. A leader's own entry
//     (BecomeLeader) waits in memory until then: an idle partition that
//     changes leader writes nothing. A failed write is final, as for the
//     segments: the log goes offline.
//   - Recovery loads it and, as Apache's LogSegment.recover, adds the
//     epoch of every recovered batch newer than its latest entry (the
//     batches after the recovery point are read anyway); then drops
//     entries past the log end and before the log start. A missing or
//     unreadable file is rebuilt from the batch headers of the whole log.
//   - A moved log start (DeleteRecords, retention) trims it in memory; the
//     file follows with the next write or at Close (recovery trims a stale
//     file the same way, as Apache's asynchronous flush relies on).

// loadEpochs builds the cache at Open, after the segments are recovered
// and the log start is known. scanned holds the epochs the recovery scans
// met in batch headers.
func (l *Log) loadEpochs(scanned Epochs) error {
	path := filepath.Join(l.dir, epochCheckpointFile)
	b, err := vfs.ReadFile(l.env.FS, path)
	if err == nil {
		if l.epochs, err = parseEpochs(b); err == nil {
			l.epochsSaved, l.epochsOnDisk = l.epochs, true
		}
	}
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.env.Logger.Warn("ignoring an unreadable leader-epoch checkpoint; rebuilding it from the log", "dir", l.dir, "err", err)
		}
		if l.epochs, err = l.rebuildEpochs(); err != nil {
			return err
		}
	} else {
		for _, x := range scanned {
			if last, ok := l.epochs.Latest(); !ok || x.Epoch > last.Epoch {
				l.epochs, _ = l.epochs.assign(x)
			}
		}
	}
	l.epochs, _ = l.epochs.truncateFromEnd(l.active().next)
	l.epochs, _ = l.epochs.truncateFromStart(l.logStart)
	l.epochsDirty = true
	if !l.epochsOnDisk && len(l.epochs) > 0 {
		// Rebuilt: saved now, so the walk is not repeated at every start.
		return l.saveEpochs()
	}
	return nil
}

// noteScannedEpoch records the epoch of a batch recovery read, if newer
// than the last one recorded.
func (l *Log) noteScannedEpoch(h BatchHeader) {
	if h.PartitionLeaderEpoch < 0 {
		return
	}
	if last, ok := l.scannedEpochs.Latest(); ok && h.PartitionLeaderEpoch <= last.Epoch {
		return
	}
	l.scannedEpochs = append(l.scannedEpochs, EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset})
}

// rebuildEpochs reads every batch header of the log for its epoch.
func (l *Log) rebuildEpochs() (Epochs, error) {
	var out Epochs
	var hdr [batchMagicOffset + 1]byte
	for _, s := range l.segments {
		for pos := int64(0); pos+BatchHeaderSize <= s.size; {
			if _, err := s.log.ReadAt(hdr[:], pos); err != nil {
				return nil, err
			}
			size := int64(int32(binary.BigEndian.Uint32(hdr[batchLengthOffset:]))) + logOverhead
			epoch := int32(binary.BigEndian.Uint32(hdr[batchLeaderEpoch:]))
			if hdr[batchMagicOffset] == 2 {
				if last, ok := out.Latest(); epoch >= 0 && (!ok || epoch > last.Epoch) {
					out = append(out, EpochEntry{Epoch: epoch, StartOffset: int64(binary.BigEndian.Uint64(hdr[:]))})
				}
			}
			if size < BatchHeaderSize {
				break // recovery checked every batch: not reached
			}
			pos += size
		}
	}
	if len(out) > 0 {
		l.env.Logger.Info("rebuilt the leader-epoch cache from the log", "dir", l.dir, "entries", len(out))
	}
	return out, nil
}

// saveEpochs writes the cache durably if it changed since the last write.
func (l *Log) saveEpochs() error {
	if !l.epochsDirty {
		return nil
	}
	if l.epochsOnDisk && slices.Equal(l.epochs, l.epochsSaved) {
		l.epochsDirty = false
		return nil
	}
	if err := durable.WriteFile(l.env.FS, filepath.Join(l.dir, epochCheckpointFile), l.epochs.encode()); err != nil {
		l.Fail(err)
		return err
	}
	l.epochsSaved, l.epochsOnDisk, l.epochsDirty = l.epochs, true, false
	return nil
}

// saveEpochsAtClose saves what the log holds of the cache: an entry that
// starts at the log end has no batch yet, and the next Open would drop
// it anyway, so a leader that wrote nothing writes no file.
func (l *Log) saveEpochsAtClose() error {
	held, _ := l.epochs.truncateFromEnd(l.active().next)
	if (l.epochsOnDisk && slices.Equal(held, l.epochsSaved)) || (!l.epochsOnDisk && len(held) == 0) {
		return nil
	}
	return l.saveEpochs()
}

// setEpochs replaces the cache in memory; saveEpochs writes it.
func (l *Log) setEpochs(e Epochs, changed bool) {
	if changed {
		l.epochs, l.epochsDirty = e, true
	}
}

// BecomeLeader records that this broker leads the partition at epoch from
// the log end on (Apache's Partition.makeLeader assigns the new epoch its
// start offset at once, so an epoch that wrote nothing still answers
// OffsetForLeaderEpoch). The entry is written before the epoch's first
// batch (see above). A single broker leads at epoch 0.
func (l *Log) BecomeLeader(epoch int32) error {
	if l.failed != nil {
		return ErrOffline
	}
	l.setEpochs(l.epochs.assign(EpochEntry{Epoch: epoch, StartOffset: l.active().next}))
	l.leaderEpoch = epoch
	return nil
}

// LeaderEpoch is the epoch BecomeLeader set (0 until then).
func (l *Log) LeaderEpoch() int32 { return l.leaderEpoch }

// Epochs is the leader-epoch cache.
func (l *Log) Epochs() Epochs { return l.epochs }

// noteAppendEpoch is Apache's maybeAssignEpochStartOffset on append: a
// batch of an epoch the cache does not end with starts a new entry. The
// cache is made durable before the batch is written.
func (l *Log) noteAppendEpoch(h BatchHeader) error {
	if h.Magic == 2 {
		l.setEpochs(l.epochs.assign(EpochEntry{Epoch: h.PartitionLeaderEpoch, StartOffset: h.BaseOffset}))
	}
	return l.saveEpochs()
}

// trimEpochs follows a moved log start (written with the next save).
func (l *Log) trimEpochs() {
	l.setEpochs(l.epochs.truncateFromStart(l.logStart))
}
