package partition

import (
	"sort"

	"kaas/state/producers"
	"kaas/storage/partlog"
)

// Summary is what the inspector shows for a partition.
type Summary struct {
	Topic          string            `json:"topic"`
	Partition      int32             `json:"partition"`
	LogStartOffset int64             `json:"log_start_offset"`
	HighWatermark  int64             `json:"high_watermark"`
	LastStable     int64             `json:"last_stable_offset"`
	EndOffset      int64             `json:"log_end_offset"`
	Segments       int               `json:"segments"`
	SizeBytes      int64             `json:"size_bytes"`
	Producers      []ProducerSummary `json:"producers"`
	PendingAcks    int               `json:"pending_acks"`
	// AwaitingMarker counts TV2 batches waiting for the marker of their
	// producer's previous transaction (produce_await.go).
	AwaitingMarker int `json:"awaiting_marker"`
	// LeaderEpoch is the epoch this broker leads at; Epochs the
	// leader-epoch cache (each epoch and the first offset it wrote).
	LeaderEpoch int32                `json:"leader_epoch"`
	Epochs      []partlog.EpochEntry `json:"leader_epochs"`
	// Offline is the disk error that took the partition offline.
	Offline string `json:"offline,omitempty"`
	// Cleaner is the log cleaner's state (compacted topics only).
	Cleaner *CleanerSummary `json:"cleaner,omitempty"`
}

// ProducerSummary is one producer id's state on the partition.
type ProducerSummary struct {
	ProducerID     int64 `json:"producer_id"`
	Epoch          int16 `json:"epoch"`
	LastSequence   int32 `json:"last_sequence"`
	TxnFirstOffset int64 `json:"txn_first_offset"`
}

func (p *Partition) inspect() Summary {
	s := Summary{
		Topic: p.cfg.Topic, Partition: p.cfg.Partition,
		LogStartOffset: p.log.LogStartOffset(), HighWatermark: p.log.HighWatermark(),
		LastStable: p.lastStableOffset(), EndOffset: p.log.EndOffset(),
		Segments: p.log.SegmentCount(), SizeBytes: p.log.Size(), PendingAcks: len(p.waiters),
		AwaitingMarker: len(p.awaiting),
		LeaderEpoch:    p.log.LeaderEpoch(), Epochs: p.log.Epochs(),
		Cleaner: p.cleanerSummary(),
	}
	if err := p.log.Failed(); err != nil {
		s.Offline = err.Error()
	}
	p.producers.EachEffective(func(pid int64, e *producers.Entry) {
		s.Producers = append(s.Producers, ProducerSummary{ProducerID: pid, Epoch: e.Epoch, LastSequence: e.LastSeq(), TxnFirstOffset: e.TxnFirstOffset})
	})
	sort.Slice(s.Producers, func(i, j int) bool { return s.Producers[i].ProducerID < s.Producers[j].ProducerID })
	return s
}
