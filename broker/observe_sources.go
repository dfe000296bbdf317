package broker

import (
	"encoding/binary"
	"iter"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/metrics"
	"kaas/storage/partlog"
	"kaas/storage/topicstore"
)

// observeFetch counts what a fetch answer carries out, per topic: record
// batch bytes, and records from each batch header (last offset delta + 1),
// without decoding records.
func (b *Broker) observeFetch(resp *kmsg.FetchResponse) {
	var total int
	var byID map[topicstore.UUID]*topic
	for i := range resp.Topics {
		t := &resp.Topics[i]
		var bytes, records int
		for j := range t.Partitions {
			data := t.Partitions[j].RecordBatches
			bytes += len(data)
			records += countRecords(data)
		}
		if bytes == 0 {
			continue
		}
		total += bytes
		name := t.Topic
		if name == "" { // v13+: topics by id only
			if byID == nil {
				byID = b.topics.load().byID
			}
			if tp := byID[topicstore.UUID(t.TopicID)]; tp != nil {
				name = tp.meta.Name
			}
		}
		b.metrics.BytesOut.WithLabelValues(name).Add(float64(bytes))
		b.metrics.RecordsOut.WithLabelValues(name).Add(float64(records))
	}
	b.metrics.FetchBytes.Observe(float64(total))
}

// countRecords sums the record counts of the whole batches in data
// (offset 8: batch length; offset 16: magic; offset 57: record count). A
// message set of the old formats (Fetch v0–3) counts one record per
// message.
func countRecords(data []byte) int {
	n := 0
	for len(data) >= 17 {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[8:])))
		if size < 17 || size > len(data) {
			break
		}
		switch {
		case data[16] < 2:
			n++
		case size >= 61:
			n += max(int(int32(binary.BigEndian.Uint32(data[57:]))), 0)
		}
		data = data[size:]
	}
	return n
}

// partitionStats yields every partition's published state for a scrape.
func (b *Broker) partitionStats() iter.Seq[metrics.PartitionStats] {
	return func(yield func(metrics.PartitionStats) bool) {
		for _, t := range b.topics.load().byName {
			for _, h := range t.parts {
				if h == nil {
					continue // led by a peer broker
				}
				v := h.View()
				if v == nil {
					continue
				}
				s := metrics.PartitionStats{
					Topic: h.Topic, Partition: h.Partition,
					LogStart: v.LogStart, HighWatermark: v.HighWatermark, LastStable: v.LastStable,
					LogEnd: v.EndOffset, SizeBytes: v.Size, Segments: v.SegmentCount(),
					ProducerIDs: h.ProducerIDs(), ReadCommitLag: v.EndOffset - v.LastStable,
					LeaderIsBroker: true, // one broker leads all its partitions
					Offline:        v.Offline != nil,
				}
				if !yield(s) {
					return
				}
			}
		}
	}
}

// actorKindStats adapts the actor system's mailbox counters to metrics.
func (b *Broker) actorKindStats() map[string]metrics.ActorKindStats {
	ks := b.sys.KindStats()
	out := make(map[string]metrics.ActorKindStats, len(ks))
	for kind, s := range ks {
		out[kind] = metrics.ActorKindStats{Actors: s.Actors, Depth: s.Depth, MaxDepth: s.MaxDepth, Processed: s.Processed}
	}
	return out
}

// watchForMetrics points the scrape-time collectors at this broker.
func (b *Broker) watchForMetrics() {
	b.metrics.WatchPartitions(b.partitionStats())
	b.metrics.WatchOpenSegmentFiles(partlog.OpenFiles)
	b.metrics.WatchActors(b.actorKindStats)
	b.metrics.WatchActorWakeups(b.sys.Wakeups)
	b.metrics.TxnStates.SetSource(b.txnStateCounts)
}

// txnStateCounts counts the coordinator's transactional ids by state, from
// its store (a copy under the slots' locks, no actor involved).
func (b *Broker) txnStateCounts() map[string]int {
	out := map[string]int{}
	for _, e := range b.txnEntries() {
		out[e.State.String()]++
	}
	return out
}
