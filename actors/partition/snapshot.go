package partition

import (
	"kaas/state/producers"
	"kaas/storage/partlog"
	"kaas/storage/producersnap"
)

// Between the producer state (state/producers) and storage: the
// snapshot file's format (storage/producersnap) and the batch header.

func encodeSnapshot(s *producers.State, offset int64) ([]byte, error) {
	out := make(map[int64]producersnap.Producer, s.Len())
	s.Each(func(pid int64, e *producers.Entry) {
		p := producersnap.Producer{Epoch: e.Epoch, CoordinatorEpoch: e.CoordinatorEpoch, LastTimestamp: e.LastTimestamp,
			TxnFirstOffset: e.TxnFirstOffset}
		for _, w := range e.Window {
			p.Window = append(p.Window, producersnap.Batch(w))
		}
		out[pid] = p
	})
	return producersnap.Encode(offset, out)
}

// restoreSnapshot loads a snapshot into s and returns the offset it
// covers; s is unchanged when the snapshot cannot be read.
func restoreSnapshot(s *producers.State, b []byte) (int64, error) {
	offset, ps, err := producersnap.Decode(b)
	if err != nil {
		return 0, err
	}
	entries := make(map[int64]producers.Entry, len(ps))
	for pid, p := range ps {
		e := producers.Entry{Epoch: p.Epoch, CoordinatorEpoch: p.CoordinatorEpoch, LastTimestamp: p.LastTimestamp,
			TxnFirstOffset: p.TxnFirstOffset}
		for _, w := range p.Window {
			e.Window = append(e.Window, producers.BatchMeta(w))
		}
		entries[pid] = e
	}
	s.Load(entries)
	return offset, nil
}

// producerBatch is what the producer state reads of a data batch's
// header.
func producerBatch(h partlog.BatchHeader) producers.Batch {
	return producers.Batch{BaseOffset: h.BaseOffset, LastOffsetDelta: h.LastOffsetDelta, MaxTimestamp: h.MaxTimestamp,
		ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch, BaseSequence: h.BaseSequence,
		Transactional: h.IsTransactional()}
}
