package broker

// __consumer_offsets as a readable topic (issue 24): Fetch, ListOffsets
// and OffsetForLeaderEpoch on its partition n answer from coordinator
// slot n's record view (storage/offsetlog/view.go), so lag tools that
// decode Apache's offsets topic (Burrow, kafka-lag-exporter, a kmsg
// OffsetCommitKey/Value reader) see every group's commits.
//
// The design, and why: kaas keeps group state in its slot logs, whose
// records already are Apache's (OffsetCommit key v1 / value v1 or v3,
// GroupMetadata key v2 / value v3+, the KIP-848 records), each numbered by
// a sequence number that the log keeps through compaction, restarts and
// changes of owner. So the topic is a derived, read-only view of the slot
// log rather than a second log: the record at Kafka offset o is the slot's
// record numbered o+1, compacted to the latest record per key as Apache's
// cleaner shows the topic, tombstones (deleted groups, expired or deleted
// offsets) kept for delete.retention.ms. Offsets never go backwards and
// are never reused, as the numbers never are; no second copy of the data
// is written, and nothing the coordinators write waits for a reader.
//
// A record shows once its fsync covered it, so a lag tool sees a commit
// as soon as the committer's answer goes out (well within a second). A
// transactional offset stays hidden, and the stable offset (and what
// either isolation level reads) stops before it, until its marker.
// Batches are built at read time: uncompressed magic-2 batches of up to
// offsetsBatchRecords records, no producer id, leader epoch 0 (the view
// has one epoch; OffsetForLeaderEpoch answers it ending at the high
// watermark).
//
// The partition is led by the slot's owner (this broker for a single
// broker); anyone else, or the owner once the lease it claimed the slot
// under is in doubt, answers NOT_LEADER_OR_FOLLOWER. Produce to it stays
// refused (topic_internal.go). ACLs as Apache's: READ on the topic to
// fetch, DESCRIBE to list offsets. __transaction_state stays an empty view.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/offsetlog"
	"kaas/storage/partlog"
)

// offsetsBatchRecords is how many records one batch of the view holds.
const offsetsBatchRecords = 100

// offsetsTopicView is __consumer_offsets partition p's view if this broker
// serves slot p: nil with code 0 for a slot never written (an empty
// partition), or nil with NOT_LEADER_OR_FOLLOWER when a peer serves it or
// this broker's lease is in doubt.
func (b *Broker) offsetsTopicView(p int32) (*offsetlog.View, int16) {
	co := b.coordinating()
	if co == nil || p < 0 || int(p) >= len(co.groupOwned) || !co.groupOwned[p].Load() || !b.slotAlive(offsetsSlots, int(p)) {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return co.groups.offsets.View(int(p)), 0
}

// isOffsetsTopic reports whether it is __consumer_offsets.
func isOffsetsTopic(it *internalTopic) bool { return it != nil && it.name == consumerOffsetsTopic }

// viewOffsets are a view's log start, high watermark and last stable
// offset (all 0 for a slot never written).
func viewOffsets(v *offsetlog.View) (logStart, hw, lso int64) {
	if v == nil {
		return 0, 0, 0
	}
	return v.Offsets()
}

// fetchOffsetsTopic fills one __consumer_offsets partition's fetch answer
// from view v and returns the bytes read. first: nothing was read for an
// earlier partition, so this one may exceed remaining by one batch.
func fetchOffsetsTopic(version int16, v *offsetlog.View, rp *kmsg.FetchRequestTopicPartition, out *kmsg.FetchResponseTopicPartition, remaining int32, first bool) int {
	out.ErrorCode = 0
	out.LogStartOffset, out.HighWatermark, out.LastStableOffset = viewOffsets(v)
	out.RecordBatches = []byte{}
	out.AbortedTransactions = nil
	if rp.FetchOffset < 0 || rp.FetchOffset > out.HighWatermark {
		out.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	}
	limit := min(rp.PartitionMaxBytes, remaining)
	if v == nil || (limit <= 0 && !first) {
		return 0
	}
	recs := v.Read(nil, rp.FetchOffset, int(limit))
	var data []byte
	for len(recs) > 0 {
		n := min(len(recs), offsetsBatchRecords)
		batch := make([]partlog.Rec, n)
		base := recs[0].Offset
		for i, r := range recs[:n] {
			batch[i] = partlog.Rec{OffsetDelta: int32(r.Offset - base), Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
		}
		next := partlog.AppendBatch(data, base, 0, batch)
		if len(data) > 0 && int32(len(next)) > limit {
			break // the batch overhead took the answer past the limit
		}
		data, recs = next, recs[n:]
	}
	if version < 4 && len(data) > 0 {
		// Old fetches read old messages (01_fetch.go); these batches
		// were built here, so they convert.
		data, _ = partlog.DownConvert(data, legacyFetchMagic(version), 0, 0)
	}
	if !first && int32(len(data)) > remaining {
		return 0
	}
	if len(data) > 0 {
		out.RecordBatches = data
	}
	return len(data)
}

// listOffsetsTopic answers ListOffsets on a __consumer_offsets partition
// from view v, as for any partition (02_list_offsets.go).
func listOffsetsTopic(v *offsetlog.View, readCommittedBound bool, rp kmsg.ListOffsetsRequestTopicPartition, p *kmsg.ListOffsetsResponseTopicPartition) {
	logStart, hw, lso := viewOffsets(v)
	p.LeaderEpoch = 0
	switch rp.Timestamp {
	case listLatest:
		p.Offset = hw
		if readCommittedBound {
			p.Offset = lso
		}
	case listEarliest, listEarliestLocal:
		p.Offset = logStart
	case listMaxTimestamp:
		if v != nil {
			p.Offset, p.Timestamp = v.MaxTimestamp()
		}
	default:
		if rp.Timestamp < 0 {
			p.ErrorCode = kerr.InvalidRequest.Code
			return
		}
		if v != nil {
			p.Offset, p.Timestamp = v.OffsetForTime(rp.Timestamp)
		}
	}
	if p.Offset < 0 {
		p.LeaderEpoch = -1
	}
}
