package broker

import (
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/partition"
	"kaas/broker/auth"
	"kaas/net/server"
	"kaas/state/acl"
	"kaas/storage/offsetlog"
	"kaas/storage/partlog"
	"kaas/storage/topicstore"
)

func init() {
	register(api{key: 1, min: 0, max: 18, serve: serveFetch, fail: failFetch})
}

const readCommitted = 1

// serveFetch serves Fetch (key 1), versions 0–18 (topic ids from v13; v17's
// replica directory id and v18's follower fields are for replicas, which
// kaas has none of). v0–3 (Kafka 3.7 still serves them) read message sets:
// the batches read are converted down to magic 0 (v0–1) or 1 (v2–3),
// uncompressed, control batches left out, as Apache down-converts
// (storage/partlog/legacy.go).
//
// Fetches never go through partition actors: each partition's bytes are
// read from the log's published view, up to the high watermark (or the
// last stable offset for read_committed, with the aborted transactions the
// range overlaps). When fewer than MinBytes are ready the fetch waits, up
// to MaxWaitMillis, on the views' change signals — woken by appends, not by
// a timer loop — or until the broker shuts down.
//
// Fetch sessions (KIP-227, v7+) as Apache's: fetch_session_context.go
// says what a request does with them, fetch_session_cache.go how the
// slots (max.incremental.fetch.session.cache.slots) are shared. An
// incremental fetch reads and waits on every partition of its session and
// answers only those with something new.
// A partition that fails to read (not led here, a leader epoch that does
// not match, an offset out of range, a storage error) answers the fetch
// at once, as Apache's ReplicaManager does (errorReadingData); unknown
// and unauthorized topics do not.
// Each fetch runs on its own goroutine; the connection keeps dispatching.
// __consumer_offsets is read from its slots' record views
// (topic_consumer_offsets.go), __transaction_state answers every
// partition empty (topic_internal.go).
// A partition led by a peer broker is NOT_LEADER_OR_FOLLOWER; a
// CurrentLeaderEpoch (v9+) older than the leader's is FENCED_LEADER_EPOCH,
// a newer one UNKNOWN_LEADER_EPOCH (leaderEpochCode). A LastFetchedEpoch
// (v12+) is checked against the leader-epoch cache as Apache does
// (divergingEpoch).
//
// With --authorizer: READ on each topic (TOPIC_AUTHORIZATION_FAILED, after
// UNKNOWN_TOPIC_ID for an id nobody knows); a follower (a replica id)
// CLUSTER_ACTION on the cluster for all of it.
func serveFetch(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.FetchRequest)
	a := b.sec.Access(c)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				b.log.Error("fetch panicked", "panic", r)
				c.Reply(failFetch(req, kerr.UnknownServerError.Code))
			}
		}()
		var bufs []*partlog.Buf
		resp := b.fetchInSession(req, a, c, &bufs)
		if len(bufs) == 0 {
			c.Reply(resp)
			return
		}
		// The answer references the buffers its record sets were read
		// into; they go back to their pool once the connection has
		// written them.
		c.ReplyReleasing(resp, func() {
			for _, pb := range bufs {
				pb.Release()
			}
		})
	}()
	return nil
}

// fetchInSession serves req through its session (if any): an incremental
// fetch reads every partition of the session and answers what changed.
// The record sets are read into pooled buffers, added to bufs.
//
// A consumer's fetch is held to its consumer byte-rate quota: it asks for
// at most what the quota window allows, and an answer over the quota goes
// out empty, with the throttle time (quotas.go).
func (b *Broker) fetchInSession(req *kmsg.FetchRequest, a auth.Access, c *server.Call, bufs *[]*partlog.Buf) *kmsg.FetchResponse {
	follower := isFollowerFetch(req)
	ctx := b.fetchSessions.Resolve(req, follower)
	if ctx.Failed() {
		return b.fetchSessions.Answer(ctx, nil)
	}
	if limit, ok := b.fetchQuotaCap(c); ok && !follower && limit < ctx.Req.MaxBytes {
		ctx.Req.MaxBytes = limit
	}
	resp := b.fetch(ctx.Req, c.Gone(), b.fetchAccess(a, ctx.Req), bufs)
	if !follower && b.fetchQuota(c, resp) {
		return b.fetchSessions.Throttled(ctx)
	}
	return withEmptyRecords(b.fetchSessions.Answer(ctx, resp))
}

// isFollowerFetch: a replica's fetch (its sessions are privileged).
func isFollowerFetch(req *kmsg.FetchRequest) bool {
	return req.ReplicaID >= 0 || req.ReplicaState.ID >= 0
}

// withEmptyRecords gives every partition without data an empty, not null,
// records field: below v12 a null encodes as size -1, which Apache never
// sends and librdkafka rejects ("invalid MessageSetSize -1"), so a
// caught-up librdkafka consumer would retry forever.
func withEmptyRecords(resp *kmsg.FetchResponse) *kmsg.FetchResponse {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.RecordBatches == nil {
				p.RecordBatches = []byte{}
			}
		}
	}
	return resp
}

// fetchTarget is one requested partition resolved to its handle.
type fetchTarget struct {
	topic  int
	part   int
	handle *partition.Handle
	req    *kmsg.FetchRequestTopicPartition
	// offsets: a __consumer_offsets partition served here, read from its
	// slot's view (nil: never written) instead of a handle.
	offsets     bool
	offsetsView *offsetlog.View
}

// changed is a channel closed once the target's data may have changed
// since it was last read (offsets views; nil for partitions, which the
// Waiter watches).
func (tg *fetchTarget) changed() <-chan struct{} {
	if tg.offsetsView == nil {
		return nil
	}
	return tg.offsetsView.Changed()
}

// fetchAccess is who may read what: a follower (a replica id) needs
// CLUSTER_ACTION on the cluster for everything, a consumer READ on each
// topic. The answer maps topic names (or, from v13, topic ids as strings)
// to allowed; nil allows everything.
func (b *Broker) fetchAccess(a auth.Access, req *kmsg.FetchRequest) map[string]bool {
	if !a.On() {
		return nil
	}
	follower := isFollowerFetch(req)
	out := map[string]bool{}
	cluster := follower && a.Cluster(acl.ClusterAction)
	for _, rt := range req.Topics {
		name := rt.Topic
		if req.Version >= 13 {
			t := b.topics.load().byID[topicstore.UUID(rt.TopicID)]
			it := internalByID(topicstore.UUID(rt.TopicID))
			switch {
			case t != nil:
				name = t.meta.Name
			case it != nil:
				name = it.name
			default:
				continue // UNKNOWN_TOPIC_ID comes first
			}
		}
		if _, done := out[name]; done {
			continue
		}
		if follower {
			out[name] = cluster
		} else {
			out[name] = a.Topic(acl.Read, name)
		}
	}
	return out
}

// fetch answers req; record sets are read into pooled buffers added to
// bufs (nil: unpooled).
func (b *Broker) fetch(req *kmsg.FetchRequest, gone <-chan struct{}, readable map[string]bool, bufs *[]*partlog.Buf) *kmsg.FetchResponse {
	topics := b.topics.load()
	// Sized up front: a consumer of a thousand partitions names them all
	// in every fetch, and growing these slices by appending was the
	// largest cost of answering it.
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	targets := make([]fetchTarget, 0, n)
	readErr := false // a partition failed to read: answer at once
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Topics = make([]kmsg.FetchResponseTopic, 0, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		var t *topic
		if req.Version >= 13 {
			t = topics.byID[topicstore.UUID(rt.TopicID)]
		} else {
			t = topics.byName[rt.Topic]
		}
		var it *internalTopic
		if req.Version >= 13 {
			it = internalByID(topicstore.UUID(rt.TopicID))
		} else {
			it = internalByName(rt.Topic)
		}
		out := kmsg.NewFetchResponseTopic()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		out.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			p.RecordBatches = []byte{}
			switch {
			case it != nil && !auth.AllowedIn(readable, it.name):
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case isOffsetsTopic(it) && it.hasPartition(rp.Partition):
				// The slot's record view (topic_consumer_offsets.go).
				v, code := b.offsetsTopicView(rp.Partition)
				if code != 0 {
					p.ErrorCode = code
					readErr = true
					break
				}
				targets = append(targets, fetchTarget{topic: i, part: len(out.Partitions), req: rp, offsets: true, offsetsView: v})
			case it != nil && it.hasPartition(rp.Partition):
				// Always empty: see topic_internal.go.
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 0, 0, 0
			case it != nil:
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case t == nil && req.Version >= 13:
				p.ErrorCode = kerr.UnknownTopicID.Code
			case !auth.AllowedIn(readable, topicName(t, rt.Topic)):
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case t.parts[rp.Partition] == nil:
				p.ErrorCode = kerr.NotLeaderForPartition.Code // led by a peer broker
				readErr = true
			case b.leaderEpochCode(t.meta.Name, rp.Partition, rp.CurrentLeaderEpoch) != 0:
				// By name: from v13 the request names topics by id only.
				p.ErrorCode = b.leaderEpochCode(t.meta.Name, rp.Partition, rp.CurrentLeaderEpoch)
				readErr = true
			default:
				targets = append(targets, fetchTarget{topic: i, part: len(out.Partitions), handle: t.parts[rp.Partition], req: rp})
			}
			out.Partitions = append(out.Partitions, p)
		}
		resp.Topics = append(resp.Topics, out)
	}

	// fetch.max.bytes caps the answer whatever the request asks, and
	// MinBytes with it (Apache's KafkaApis.handleFetchRequest).
	maxBytes := min(req.MaxBytes, b.cfg.FetchMaxBytes)
	minBytes := min(req.MinBytes, maxBytes)
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	views := make([]*partlog.View, len(targets))
	// changes are the offsets views' change channels as of their last read.
	changes := make([]<-chan struct{}, len(targets))
	read := func(i, bytes int) int {
		out := &resp.Topics[targets[i].topic].Partitions[targets[i].part]
		var n int
		if tg := &targets[i]; tg.offsets {
			changes[i] = tg.changed()
			n = fetchOffsetsTopic(req.Version, tg.offsetsView, tg.req, out, maxBytes-int32(bytes), bytes == 0)
		} else {
			views[i] = tg.handle.View()
			n = b.fetchPartition(req, *tg, views[i], out, maxBytes-int32(bytes), bytes == 0, bufs)
		}
		readErr = readErr || out.ErrorCode != 0
		return n
	}
	// current reports whether target i is as it was when last read.
	current := func(i int) bool {
		if targets[i].offsets {
			select {
			case <-changes[i]:
				return false
			default:
				return true
			}
		}
		return targets[i].handle.View() == views[i]
	}
	bytes := 0
	for i := range targets {
		bytes += read(i, bytes)
	}
	var w *partition.Waiter
	stopWatching := make(chan struct{})
	defer func() {
		close(stopWatching)
		if w != nil {
			for _, tg := range targets {
				if !tg.offsets {
					tg.handle.Unwatch(w)
				}
			}
		}
	}()
	for bytes < int(minBytes) && !readErr && len(targets) > 0 && time.Now().Before(deadline) {
		if w == nil {
			w = partition.NewWaiter(len(targets))
			for i, tg := range targets {
				switch {
				case !tg.offsets:
					tg.handle.Watch(w, i)
				case tg.offsetsView != nil:
					go watchOffsetsView(tg.offsetsView, w, i, stopWatching)
				}
			}
			// A view published between the read and the registration
			// would not wake us.
			for i := range targets {
				if !current(i) {
					w.Mark(i)
				}
			}
		}
		b.metrics.FetchesWaiting.Inc()
		woken := waitForChange(w, deadline, gone, b.draining(gone))
		b.metrics.FetchesWaiting.Dec()
		if !woken {
			return resp
		}
		changed := w.Changed()
		if bytes > 0 {
			// Some partitions already hold data (short of MinBytes):
			// read everything again, in order, for the byte budget.
			bytes = 0
			for i := range targets {
				bytes += read(i, bytes)
			}
			continue
		}
		// Nothing read so far: the partitions that did not change would
		// read nothing again, so only the changed ones are read, in
		// request order.
		sort.Ints(changed)
		for _, i := range changed {
			if !current(i) {
				bytes += read(i, bytes)
			}
		}
	}
	return resp
}

// fetchPartition fills one partition's answer and returns the bytes read.
// first says no bytes were read for earlier partitions, so this one may
// exceed the remaining budget by one batch (KIP-74). With bufs, the
// records are read into a pooled buffer added to it.
func (b *Broker) fetchPartition(req *kmsg.FetchRequest, tg fetchTarget, v *partlog.View, out *kmsg.FetchResponseTopicPartition, remaining int32, first bool, bufs *[]*partlog.Buf) int {
	out.ErrorCode = 0
	if v.Offline != nil {
		// A disk error took the partition offline; as Apache answers
		// for a partition on a failed log directory.
		out.ErrorCode = kerr.KafkaStorageError.Code
		out.HighWatermark, out.LastStableOffset, out.LogStartOffset = -1, -1, -1
		return 0
	}
	out.HighWatermark, out.LastStableOffset, out.LogStartOffset = v.HighWatermark, v.LastStable, v.LogStart
	// Empty, never null: librdkafka rejects a null records field (Apache
	// always sends an empty one).
	out.RecordBatches = []byte{}
	upTo := v.HighWatermark
	if req.IsolationLevel == readCommitted {
		upTo = v.LastStable
		out.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
	} else {
		out.AbortedTransactions = nil
	}
	if diverged, code := divergingEpoch(req, tg.req, v, out); diverged || code != 0 {
		out.ErrorCode = code
		return 0
	}
	limit := tg.req.PartitionMaxBytes
	if limit > remaining {
		limit = remaining
	}
	if limit <= 0 && !first {
		return 0
	}
	var data []byte
	var err error
	if bufs != nil {
		var pb *partlog.Buf
		data, pb, err = v.ReadPooled(tg.req.FetchOffset, limit, upTo)
		if pb != nil {
			*bufs = append(*bufs, pb)
		}
	} else {
		data, err = v.Read(tg.req.FetchOffset, limit, upTo)
	}
	if errors.Is(err, partlog.ErrOffsetOutOfRange) {
		out.ErrorCode = kerr.OffsetOutOfRange.Code
		return 0
	}
	if err != nil {
		b.log.Error("fetch read failed", "topic", tg.handle.Topic, "partition", tg.handle.Partition, "err", err)
		out.ErrorCode = kerr.KafkaStorageError.Code
		return 0
	}
	if req.Version < 4 && len(data) > 0 {
		if data, err = partlog.DownConvert(data, legacyFetchMagic(req.Version), partlog.InflateLimit(b.cfg.FetchMaxBytes), int(limit)); err != nil {
			b.log.Error("converting a fetch down to old messages failed", "topic", tg.handle.Topic, "partition", tg.handle.Partition, "err", err)
			out.ErrorCode = kerr.CorruptMessage.Code
			return 0
		}
	}
	if !first && int32(len(data)) > remaining {
		return 0
	}
	if data != nil {
		out.RecordBatches = data
	}
	if req.IsolationLevel == readCommitted && len(data) > 0 {
		next := lastBatchEnd(data)
		for _, a := range v.AbortedTxns(tg.req.FetchOffset, next) {
			at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
			at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
			out.AbortedTransactions = append(out.AbortedTransactions, at)
		}
	}
	return len(data)
}

// divergingEpoch is Apache's check of LastFetchedEpoch (v12+, KIP-595;
// -1 when the fetcher has none, as consumers send): where the epoch the
// fetcher last read ended, from the leader-epoch cache. An epoch the
// cache cannot place, or an offset below the log start, is
// OFFSET_OUT_OF_RANGE; an epoch that ended before the fetch offset (or
// was followed by an older one) answers no records and DivergingEpoch,
// the epoch and offset the fetcher must truncate to.
func divergingEpoch(req *kmsg.FetchRequest, rp *kmsg.FetchRequestTopicPartition, v *partlog.View, out *kmsg.FetchResponseTopicPartition) (bool, int16) {
	if req.Version < 12 || rp.LastFetchedEpoch < 0 {
		return false, 0
	}
	epoch, end := v.Epochs.EndOffsetFor(rp.LastFetchedEpoch, v.EndOffset)
	if epoch == partlog.UndefinedEpoch || end == partlog.UndefinedEpochOffset || rp.FetchOffset < v.LogStart {
		return false, kerr.OffsetOutOfRange.Code
	}
	if epoch < rp.LastFetchedEpoch || end < rp.FetchOffset {
		out.DivergingEpoch.Epoch, out.DivergingEpoch.EndOffset = epoch, end
		return true, 0
	}
	return false, 0
}

// legacyFetchMagic is the message format Fetch v0–3 answer in: magic 0
// for v0–1, 1 for v2–3 (Apache's down-conversion).
func legacyFetchMagic(version int16) int8 {
	if version < 2 {
		return 0
	}
	return 1
}

// lastBatchEnd is the offset after the last batch in data.
func lastBatchEnd(data []byte) int64 {
	batches, _ := partlog.SplitBatches(data)
	if len(batches) == 0 {
		return 0
	}
	h, _ := partlog.ParseBatchHeader(batches[len(batches)-1])
	return h.NextOffset()
}

// watchOffsetsView marks index on w at each change of an offsets view,
// until stop (the fetch answered) or the view closes (its slot went).
func watchOffsetsView(v *offsetlog.View, w *partition.Waiter, index int, stop <-chan struct{}) {
	for {
		select {
		case <-v.Changed():
			w.Mark(index)
			if v.Closed() {
				return
			}
		case <-stop:
			return
		}
	}
}

// waitForChange blocks until a watched partition publishes a new view,
// the deadline passes, the client goes away or the broker shuts down; it
// reports whether a view changed (and so whether reading again is worth
// it).
func waitForChange(w *partition.Waiter, deadline time.Time, gone, draining <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-w.C:
		return true
	case <-timer.C:
	case <-gone:
	case <-draining:
	}
	return false
}

func failFetch(r kmsg.Request, code int16) kmsg.Response {
	req := r.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			p.RecordBatches = []byte{}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return withEmptyRecords(resp)
}

// topicName is a known topic's name, or the name a request used.
func topicName(t *topic, requested string) string {
	if t != nil {
		return t.meta.Name
	}
	return requested
}
