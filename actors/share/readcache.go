package share

import (
	"kaas/model"
	"kaas/state/sharepartition"
	"kaas/storage/partlog"
)

// The share coordinator's read cache: the batches it last read of a
// partition, kept for the fetches that follow. A share fetch acquires at
// most MaxRecords (500 for franz-go) of a window bounded at
// group.share.partition.max.record.locks (2000), but a read returns whole
// batches, and a producer's batch holds thousands of records (up to 1 MiB):
// eight consumers sharing a partition each read the same megabyte again
// for a few hundred records (bench share-8: 830 KiB read per fetch for 271
// records acquired, the coordinator's main cost). Log bytes below the high
// watermark never change, so a cached batch is as good as a new read for
// as long as it holds the offsets wanted; batches at or past the read's
// upper bound (the high watermark or, read_committed, the LSO) are never
// served from it. The cache keeps maxCachedReads partitions, each at most
// one read's bytes (readBytes, or one larger batch).

const maxCachedReads = 32

// cachedRead is one read's batches.
type cachedRead struct {
	data    []byte
	batches []sharepartition.Batch
	spans   []span
}

// read returns whole batches of tp from offset from, below upTo, at most
// about size bytes (at least one batch), from the cache when it holds
// from and at least want records past it, else from the log (and then
// caches them).
func (a *shareActor) read(tp model.TopicIDPartition, v *partlog.View, from int64, size int32, upTo, want int64) ([]byte, []sharepartition.Batch, []span, error) {
	if c := a.reads[tp]; c != nil {
		if data, bs, ss, ok := c.from(from, upTo, want); ok {
			return data, bs, ss, nil
		}
	}
	data, err := v.Read(from, size, upTo)
	if err != nil {
		return nil, nil, nil, err
	}
	bs, ss := batchesOf(data)
	a.learnRecordBytes(tp, bs, ss)
	if len(bs) > 0 {
		if _, ok := a.reads[tp]; !ok && len(a.reads) >= maxCachedReads {
			for k := range a.reads { // any one: reads of a partition come in runs
				delete(a.reads, k)
				break
			}
		}
		a.reads[tp] = &cachedRead{data: data, batches: bs, spans: ss}
	}
	return data, bs, ss, nil
}

// from serves a read from the cache: the batches holding offsets from on,
// below upTo, when the first holds from and they reach want records past
// it (or stop at upTo: nothing more to read).
func (c *cachedRead) from(from, upTo, want int64) ([]byte, []sharepartition.Batch, []span, bool) {
	i := 0
	for i < len(c.batches) && c.batches[i].Last < from {
		i++
	}
	if i == len(c.batches) || c.batches[i].First > from {
		return nil, nil, nil, false
	}
	j := i
	for j < len(c.batches) && c.batches[j].First < upTo {
		j++
	}
	last := c.batches[j-1].Last
	if last-from+1 < want && last+1 < upTo {
		return nil, nil, nil, false
	}
	ss := make([]span, j-i)
	base := c.spans[i].start
	for k := range ss {
		s := c.spans[i+k]
		s.start -= base
		s.end -= base
		ss[k] = s
	}
	return c.data[base:c.spans[j-1].end], c.batches[i:j], ss, true
}
