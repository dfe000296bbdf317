package fetchsession

// What one Fetch does with sessions (KIP-227), as Apache's FetchManager
// and FetchContext:
//   - v4–6, or epoch -1 (FINAL): sessionless; a session the request names
//     is closed; the answer's session id is 0.
//   - epoch 0 (INITIAL): full; a session the request names is closed, and
//     a new one made from the answer if the cache has (or can free) a slot.
//   - any other epoch: incremental on the named session. An unknown id is
//     FETCH_SESSION_ID_NOT_FOUND, an epoch other than the session's
//     INVALID_FETCH_SESSION_EPOCH, a session of v13+ fetches used below
//     v13 (or the reverse) FETCH_SESSION_TOPIC_ID_ERROR: top-level errors
//     with session id 0 and no partitions. Otherwise the request's
//     partitions are added or updated, its forgotten topics removed, and
//     the fetch covers every partition of the session; the answer carries
//     only those with records, a new high watermark or log start offset,
//     or an error. A session left with no partitions is closed and the
//     fetch is answered sessionless.
// If two fetches race on one session, the one answered after the other
// moved the epoch on gets INVALID_FETCH_SESSION_EPOCH with the session's
// id (Apache's check in updateAndGenerateResponseData).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/storage/topicstore"
)

type fetchContextKind int

const (
	fetchSessionless fetchContextKind = iota
	fetchFull
	fetchIncremental
	fetchSessionError
)

// Context is how one Fetch request uses the session cache.
type Context struct {
	kind       fetchContextKind
	err        int16    // fetchSessionError's code
	session    *session // fetchIncremental's session
	epoch      int32    // fetchIncremental: the request's epoch
	privileged bool
	// Req is the fetch to serve: the request itself, or for an
	// incremental fetch every partition of the session, in its order.
	Req *kmsg.FetchRequest
}

// Failed reports a session error: answer with Answer(ctx, nil), no fetch.
func (ctx *Context) Failed() bool { return ctx.kind == fetchSessionError }

// Resolve resolves req against the session cache: how this Fetch uses its
// session. privileged: a follower's fetch.
func (c *Cache) Resolve(req *kmsg.FetchRequest, privileged bool) *Context {
	ctx := &Context{kind: fetchSessionless, privileged: privileged, Req: req}
	id, epoch := int32(0), int32(-1)
	if req.Version >= 7 {
		id, epoch = req.SessionID, req.SessionEpoch
	}
	if epoch == 0 || epoch == -1 {
		if id != 0 {
			c.remove(id)
		}
		if epoch == 0 && c.slots > 0 {
			ctx.kind = fetchFull
		}
		return ctx
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.byID[id]
	if s == nil {
		return &Context{kind: fetchSessionError, err: kerr.FetchSessionIDNotFound.Code, Req: req}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch != epoch:
		return &Context{kind: fetchSessionError, err: kerr.InvalidFetchSessionEpoch.Code, Req: req}
	case s.usesTopicIDs != (req.Version >= 13):
		return &Context{kind: fetchSessionError, err: kerr.FetchSessionTopicIDError.Code, Req: req}
	}
	s.update(req)
	if s.parts.len() == 0 {
		c.removeLocked(s)
		return ctx
	}
	c.touchLocked(s, now, s.parts.len())
	s.epoch = nextFetchEpoch(s.epoch)
	ctx.kind, ctx.session, ctx.epoch = fetchIncremental, s, epoch
	ctx.Req = s.request(req)
	return ctx
}

// key is how a session of req's version names partition p of topic t.
func fetchKey(version int16, t *kmsg.FetchRequestTopic, p int32) sessionKey {
	if version >= 13 {
		return sessionKey{id: topicstore.UUID(t.TopicID), part: p}
	}
	return sessionKey{topic: t.Topic, part: p}
}

// update applies an incremental request's partitions and forgotten
// topics (FetchSession.update). s.mu is held.
func (s *session) update(req *kmsg.FetchRequest) {
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			k := fetchKey(req.Version, t, rp.Partition)
			cp := s.parts.find(k)
			if cp == nil {
				cp = &cachedPartition{key: k, highWatermark: -1, localLogStart: -1}
				s.parts.add(cp)
			}
			cp.setRequest(rp)
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := sessionKey{topic: ft.Topic, part: p}
			if req.Version >= 13 {
				k = sessionKey{id: topicstore.UUID(ft.TopicID), part: p}
			}
			s.parts.remove(k)
		}
	}
}

func (cp *cachedPartition) setRequest(rp *kmsg.FetchRequestTopicPartition) {
	cp.fetchOffset, cp.logStartOffset, cp.maxBytes = rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes
	cp.leaderEpoch, cp.lastFetchedEpoch = rp.CurrentLeaderEpoch, rp.LastFetchedEpoch
}

// request is the fetch of every partition of the session, in its order,
// with req's other fields. s.mu is held.
func (s *session) request(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	out := *req
	out.ForgottenTopics = nil
	out.Topics = nil
	parts := make([]kmsg.FetchRequestTopicPartition, 0, s.parts.len())
	var t *kmsg.FetchRequestTopic
	for cp := s.parts.head; cp != nil; cp = cp.next {
		if t == nil || t.Topic != cp.key.topic || t.TopicID != [16]byte(cp.key.id) {
			out.Topics = append(out.Topics, kmsg.FetchRequestTopic{Topic: cp.key.topic, TopicID: [16]byte(cp.key.id)})
			t = &out.Topics[len(out.Topics)-1]
			t.Partitions = parts[len(parts):]
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = cp.key.part, cp.fetchOffset, cp.logStartOffset, cp.maxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch = cp.leaderEpoch, cp.lastFetchedEpoch
		// parts never grows past its capacity, so each topic's
		// partitions stay a window onto it.
		parts = append(parts, rp)
		t.Partitions = t.Partitions[:len(t.Partitions)+1]
	}
	return &out
}

// Answer turns the fetch's full answer (for ctx.Req) into the response
// the client gets: a new session's id, or only what changed.
func (c *Cache) Answer(ctx *Context, resp *kmsg.FetchResponse) *kmsg.FetchResponse {
	switch ctx.kind {
	case fetchSessionError:
		out := ctx.Req.ResponseKind().(*kmsg.FetchResponse)
		out.ErrorCode = ctx.err
		return out
	case fetchFull:
		resp.SessionID = c.maybeCreate(ctx.privileged, ctx.Req.Version >= 13, newSessionPartitions(ctx.Req, resp))
	case fetchIncremental:
		s := ctx.session
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.epoch != nextFetchEpoch(ctx.epoch) {
			out := ctx.Req.ResponseKind().(*kmsg.FetchResponse)
			out.ErrorCode, out.SessionID = kerr.InvalidFetchSessionEpoch.Code, s.id
			return out
		}
		s.filter(ctx.Req.Version, resp)
		resp.SessionID = s.id
	}
	return resp
}

// Throttled is the empty answer to a fetch over its quota
// (FetchContext.getThrottledResponse): an incremental fetch keeps its
// session (nothing in it is marked sent), any other gets no session.
func (c *Cache) Throttled(ctx *Context) *kmsg.FetchResponse {
	out := ctx.Req.ResponseKind().(*kmsg.FetchResponse)
	if ctx.kind == fetchIncremental {
		s := ctx.session
		s.mu.Lock()
		defer s.mu.Unlock()
		out.SessionID = s.id
		if s.epoch != nextFetchEpoch(ctx.epoch) {
			out.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		}
	}
	return out
}

// newSessionPartitions is a new session's partitions: each requested one
// with what it was just told. The answer lists the request's partitions
// in its order, one for one.
func newSessionPartitions(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) sessionPartitions {
	var sp sessionPartitions
	sp.byKey = make(map[sessionKey]*cachedPartition, len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			rp := &t.Partitions[j]
			k := fetchKey(req.Version, t, rp.Partition)
			cp := sp.find(k)
			if cp == nil {
				cp = &cachedPartition{key: k}
				sp.add(cp)
			}
			cp.setRequest(rp)
			out := &resp.Topics[i].Partitions[j]
			cp.highWatermark, cp.localLogStart = out.HighWatermark, out.LogStartOffset
		}
	}
	return sp
}

// filter drops from resp the partitions with nothing new for the fetcher
// (CachedPartition.maybeUpdateResponseData) and moves those that returned
// records to the back of the session's order. resp answers the session's
// partitions in their order, one for one (request built them, and the
// epoch check in answer proves nothing changed the session since), so it
// walks both together. s.mu is held.
func (s *session) filter(version int16, resp *kmsg.FetchResponse) {
	var moved []*cachedPartition
	next := s.parts.head
	topics := resp.Topics[:0]
	for i := range resp.Topics {
		t := &resp.Topics[i]
		parts := t.Partitions[:0]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			cp := next
			if cp != nil {
				next = cp.next
			}
			if cp == nil || cp.key.part != p.Partition {
				cp = s.parts.find(responseKey(version, t, p.Partition)) // never expected
			}
			if cp == nil || !cp.changed(p) {
				continue
			}
			if len(p.RecordBatches) > 0 {
				moved = append(moved, cp)
			}
			parts = append(parts, *p)
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, *t)
		}
	}
	clear(resp.Topics[len(topics):])
	resp.Topics = topics
	for _, cp := range moved {
		s.parts.toBack(cp)
	}
}

func responseKey(version int16, t *kmsg.FetchResponseTopic, p int32) sessionKey {
	if version >= 13 {
		return sessionKey{id: topicstore.UUID(t.TopicID), part: p}
	}
	return sessionKey{topic: t.Topic, part: p}
}

// changed reports whether p must be sent, and remembers what was sent.
func (cp *cachedPartition) changed(p *kmsg.FetchResponseTopicPartition) bool {
	must := len(p.RecordBatches) > 0
	if cp.highWatermark != p.HighWatermark {
		must, cp.highWatermark = true, p.HighWatermark
	}
	if cp.localLogStart != p.LogStartOffset {
		must, cp.localLogStart = true, p.LogStartOffset
	}
	if p.ErrorCode != 0 {
		// Sent again once the error clears.
		must, cp.highWatermark = true, -1
	}
	return must
}
