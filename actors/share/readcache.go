package share

import (
	"sync/atomic"

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

//
// Reads go into pooled buffers (partlog.ReadPooled): a fresh buffer for
// each read cost more than the read itself, its pages faulted in one by
// one (this VM: 730 us for a 71 KiB read into a new buffer, 31 us into a
// reused one; kaas bench share does ~1,700 a second). A buffer is held by
// the cache and by every answer carrying its bytes, and goes back to its
// pool when the last lets go: the cache when it replaces or evicts the
// read, an answer once its connection has written it.

const maxCachedReads = 32

// cachedRead is one read's batches.
type cachedRead struct {
	data    []byte
	batches []sharepartition.Batch
	spans   []span
	buf     *partlog.Buf
	refs    atomic.Int32 // the cache's and one per answer holding data
}

// hold takes a reference for an answer, and returns its release.
func (c *cachedRead) hold() func() {
	c.refs.Add(1)
	return c.unref
}

func (c *cachedRead) unref() {
	if c.refs.Add(-1) == 0 {
		c.buf.Release()
	}
}

// read returns whole batches of tp from offset from, below upTo, at most
// about size bytes (at least one batch), from the cache when it holds
// from and at least want records past it, else from the log (and then
// caches them). The cached read the bytes belong to is returned too, for
// an answer that hands them out to hold (nil: nothing read).
func (a *shareActor) read(tp model.TopicIDPartition, v *partlog.View, from int64, size int32, upTo, want int64) ([]byte, []sharepartition.Batch, []span, *cachedRead, error) {
	if c := a.reads[tp]; c != nil {
		if data, bs, ss, ok := c.from(from, upTo, want); ok {
			return data, bs, ss, c, nil
		}
	}
	data, pb, err := v.ReadPooled(from, size, upTo)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	bs, ss := batchesOf(data)
	a.learnRecordBytes(tp, bs, ss)
	if len(bs) == 0 {
		pb.Release()
		return nil, nil, nil, nil, nil
	}
	if old, ok := a.reads[tp]; ok {
		old.unref()
	} else if len(a.reads) >= maxCachedReads {
		for k, c := range a.reads { // any one: reads of a partition come in runs
			c.unref()
			delete(a.reads, k)
			break
		}
	}
	c := &cachedRead{data: data, batches: bs, spans: ss, buf: pb}
	c.refs.Store(1)
	a.reads[tp] = c
	return data, bs, ss, c, nil
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
