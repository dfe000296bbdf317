package broker

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/partition"
	"kaas/messages"
	"kaas/model"
	"kaas/net/server"
	"kaas/state/sharegroup"
	"kaas/state/sharepartition"
	"kaas/storage/topicstore"
)

func init() {
	register(api{key: 78, min: 0, max: 2, serve: serveShareFetch, fail: failShareFetch})
}

// defaultShareMaxRecords is what a request without MaxRecords (v0) gets.
const defaultShareMaxRecords = 500

// serveShareFetch serves ShareFetch (key 78), versions 0–2 (KIP-932; v1
// MaxRecords and BatchSize, KIP-1206; v2 IsRenewAck and the Renew
// acknowledgement, KIP-1222).
//
// A member fetches in its share session (epoch 0 opens one and may carry
// no acknowledgements, INVALID_REQUEST; then each request carries the
// next epoch, INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_NOT_FOUND; -1
// closes it, releasing what the member still holds there). Piggybacked
// acknowledgements are applied first, all or nothing per partition
// (AcknowledgeErrorCode: INVALID_RECORD_STATE for a record the member
// does not hold or whose lock ran out, INVALID_REQUEST for malformed
// batches). Then records are acquired for the member from every
// partition of the session, at most MaxRecords (500 when unset) and
// MaxBytes (capped at fetch.max.bytes), each under a lock of
// group.share.record.lock.duration.ms, and answered with their batches'
// bytes and AcquiredRecords (offset runs and delivery counts). In v2's
// ShareAcquireMode batch_optimized (0, and v0/v1) whole log batches are
// acquired, so the batch that reaches MaxRecords may pass it, in entries
// of about BatchSize records; record_limit (1) stops at MaxRecords; any
// other mode is INVALID_REQUEST (sharepartition.Acquire).
//
// A session belongs to the connection that opened it: when that
// connection closes, the session ends and the member's records there are
// released (Apache's ConnectionDisconnectListener).
//
// A fetch that acquired nothing waits up to MaxWaitMillis — woken by an
// append to one of its partitions, by a record of the group becoming
// available again (released, its lock run out, its holder gone) or by an
// acknowledgement that moved a window — and tries again; a partition
// that failed answers at once. Two fetches are answered before their
// MaxWait, where Apache holds them to it (DelayedShareFetch), as MaxWait
// allows: one that carried acknowledgements, once they are durable
// (its client waits for their results: franz-go caps such a fetch's
// MaxWait at 500 ms so that FlushAcks is not held up longer), and one
// whose member holds up a full window itself (it holds the window's
// first records), after a short wait
// (messages.ShareFetchResult.HeldUpWait): its acknowledgement, the one
// thing that frees the window, comes after the answer.
//
// IsRenewAck (v2) only acknowledges: every fetch field must be zero
// and every partition must carry acknowledgements (INVALID_REQUEST).
// With the authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED for
// the whole request) and on each topic (TOPIC_AUTHORIZATION_FAILED per
// partition). A group id of a consumer or classic group is
// GROUP_ID_NOT_FOUND. In a cluster, served by each partition's owner, as
// Apache's leader, without asking the group's coordinator about the
// member: a partition owned elsewhere (or whose lease is in doubt) is
// NOT_LEADER_OR_FOLLOWER, and the client reads the metadata again.
func serveShareFetch(b *Broker, c *server.Call) kmsg.Response {
	req := c.Request.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.AcquisitionLockTimeoutMillis = int32(b.cfg.ShareRecordLockDuration.Milliseconds())
	fail := func(code int16) kmsg.Response {
		resp.ErrorCode = code
		return resp
	}
	group, member := deref(req.GroupID), deref(req.MemberID)
	a := b.sec.Access(c)
	if code := b.shareMemberCode(c, a, "ShareFetch", group, member); code != 0 {
		return fail(code)
	}
	renew := req.Version >= 2 && req.IsRenewAck
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		return fail(kerr.InvalidRequest.Code)
	}
	if b.isOtherGroupType(group) {
		return fail(kerr.GroupIDNotFound.Code)
	}
	m := &messages.ShareFetch{AllowRenew: renew, AckOnly: renew, CanRead: shareCanRead(a)}
	m.Session = sharegroup.SessionRequest{Group: group, Member: member, Epoch: req.ShareSessionEpoch, Owner: c.Gone()}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := model.TopicIDPartition{Topic: t.TopicID, Partition: p.Partition}
			m.Session.Add = append(m.Session.Add, tp)
			if len(p.AcknowledgementBatches) == 0 {
				if renew {
					return fail(kerr.InvalidRequest.Code)
				}
				continue
			}
			ack := messages.ShareAcks{TP: tp}
			for _, ab := range p.AcknowledgementBatches {
				ack.Batches = append(ack.Batches, ackBatch(ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes))
			}
			m.Acks = append(m.Acks, ack)
		}
	}
	m.Session.HasAcks = len(m.Acks) > 0
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			m.Session.Forget = append(m.Session.Forget, model.TopicIDPartition{Topic: t.TopicID, Partition: p})
		}
	}
	m.MaxRecords = int(req.MaxRecords)
	if m.MaxRecords <= 0 {
		m.MaxRecords = defaultShareMaxRecords
	}
	m.BatchSize = int(req.BatchSize)
	m.Mode = sharepartition.Mode(req.ShareAcquireMode)
	if m.Mode != sharepartition.BatchOptimized && m.Mode != sharepartition.RecordLimit {
		return fail(kerr.InvalidRequest.Code)
	}
	m.MaxBytes = min(req.MaxBytes, b.cfg.FetchMaxBytes)
	if m.MaxBytes <= 0 {
		m.MaxBytes = b.cfg.FetchMaxBytes
	}
	deadline := time.Now().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	// A panic building the answer (or waiting) fails this request only.
	recovered := func() {
		if r := recover(); r != nil {
			b.log.Error("share fetch panicked", "panic", r)
			c.Reply(failShareFetch(req, kerr.UnknownServerError.Code))
		}
	}
	answer := func(res messages.ShareFetchResult) {
		defer recovered()
		// The answer's record sets are in the share coordinator's pooled
		// read buffers: let go of them once the connection wrote it.
		if rel := res.Release(); rel != nil {
			c.ReplyReleasing(shareFetchResponse(resp, res), rel)
			return
		}
		c.Reply(shareFetchResponse(resp, res))
	}
	// The first answer is built in the share coordinator's reply, on its
	// goroutine: a fetch that acquired records (or carried
	// acknowledgements) goes out without a hand-off to a goroutine of its
	// own, a wake-up on each poll's critical path. Only a fetch that
	// waits gets one.
	m.Reply = func(res messages.ShareFetchResult) {
		if res.Code == 0 && req.ShareSessionEpoch == 0 {
			b.watchShareConnection(group, member, c.Gone())
		}
		// A fetch that carried acknowledgements is answered as soon as
		// they are durable, records or not: its client waits for their
		// results (franz-go's FlushAcks, acknowledgement callbacks), and
		// it sends its next fetch, which waits, right after.
		if res.Code == 0 && res.Acquired == 0 && !res.Failed && !m.AckOnly && len(m.Acks) == 0 && req.ShareSessionEpoch != -1 {
			go func() {
				defer recovered()
				answer(b.waitForShares(m, res, deadline, c.Gone()))
			}()
			return
		}
		answer(res)
	}
	b.shares.Send(m)
	return nil
}

// shareConnKey is one member's share session on one connection.
type shareConnKey struct {
	gone          <-chan struct{}
	group, member string
}

// watchShareConnection ends the member's share session when the
// connection that opened it closes, as Apache does: what the member holds
// comes back at once rather than when its locks run out. One watcher per
// member and connection, however often it reopens its session.
func (b *Broker) watchShareConnection(group, member string, gone <-chan struct{}) {
	k := shareConnKey{gone, group, member}
	if _, loaded := b.shareConns.LoadOrStore(k, struct{}{}); loaded {
		return
	}
	go func() {
		<-gone
		b.shareConns.Delete(k)
		b.shares.Send(&messages.ShareConnectionClosed{Group: group, Member: member, Owner: gone})
	}()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ackBatch(first, last int64, types []int8) sharepartition.AckBatch {
	b := sharepartition.AckBatch{First: first, Last: last, Types: make([]sharepartition.AckType, len(types))}
	for i, t := range types {
		b.Types[i] = sharepartition.AckType(t)
	}
	return b
}

// askShares sends m to the share coordinator and waits for its answer.
func (b *Broker) askShares(m *messages.ShareFetch) messages.ShareFetchResult {
	done := make(chan messages.ShareFetchResult, 1)
	m.Reply = func(r messages.ShareFetchResult) { done <- r }
	b.shares.Send(m)
	return <-done
}

// waitForShares waits for something to acquire: an append to one of the
// session's partitions or a record of the group released, until the
// deadline; first is the answer so far (its acknowledgement results are
// kept).
func (b *Broker) waitForShares(m *messages.ShareFetch, first messages.ShareFetchResult, deadline time.Time, gone <-chan struct{}) messages.ShareFetchResult {
	topics := b.topics.load()
	var handles []*partition.Handle
	for _, tp := range first.Watch {
		t := topics.byID[topicstore.UUID(tp.Topic)]
		if t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.parts) && t.parts[tp.Partition] != nil {
			handles = append(handles, t.parts[tp.Partition])
		}
	}
	if len(handles) == 0 || !time.Now().Before(deadline) {
		return first
	}
	w := partition.NewWaiter(len(handles))
	for i, h := range handles {
		h.Watch(w, i)
	}
	defer func() {
		for _, h := range handles {
			h.Unwatch(w)
		}
	}()
	retry := *m
	retry.Retry, retry.Acks = true, nil
	var released <-chan struct{}
	wait := time.Until(deadline)
	if first.HeldUpWait > 0 {
		wait = min(wait, first.HeldUpWait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// Ask once more now that the watches are set: an append between the
	// first read and them would wake nobody.
	retry.HeldUp = first.HeldUpWait > 0
	for {
		res := b.askShares(&retry)
		if res.Acquired > 0 || res.Failed || res.Code != 0 {
			return mergeShareFetch(first, res)
		}
		if res.HeldUpWait > 0 && !retry.HeldUp {
			// The member came to hold up a full window while it waited.
			retry.HeldUp = true
			if d := time.Until(deadline); res.HeldUpWait < d {
				timer.Reset(res.HeldUpWait)
			}
		}
		released = res.Released
		b.metrics.FetchesWaiting.Inc()
		select {
		case <-w.C:
		case <-released:
		case <-timer.C:
			b.metrics.FetchesWaiting.Dec()
			return first
		case <-gone:
			b.metrics.FetchesWaiting.Dec()
			return first
		}
		b.metrics.FetchesWaiting.Dec()
		w.Changed()
	}
}

// mergeShareFetch adds a retry's acquisitions to the first answer.
func mergeShareFetch(first, retry messages.ShareFetchResult) messages.ShareFetchResult {
	out := first
	out.Code, out.Acquired, out.Failed = retry.Code, retry.Acquired, retry.Failed
	out.Partitions = append([]messages.ShareFetchPartition(nil), first.Partitions...)
	for _, p := range retry.Partitions {
		merged := false
		for i := range out.Partitions {
			if o := &out.Partitions[i]; o.TP == p.TP {
				o.Code, o.Records, o.Acquired = p.Code, p.Records, p.Acquired
				merged = true
			}
		}
		if !merged {
			out.Partitions = append(out.Partitions, p)
		}
	}
	return out
}

func shareFetchResponse(resp *kmsg.ShareFetchResponse, res messages.ShareFetchResult) *kmsg.ShareFetchResponse {
	resp.ErrorCode = res.Code
	if res.Code != 0 {
		return resp
	}
	if res.LockDuration > 0 {
		resp.AcquisitionLockTimeoutMillis = int32(res.LockDuration.Milliseconds())
	}
	idx := map[sharegroup.TopicID]int{}
	for _, p := range res.Partitions {
		i, ok := idx[p.TP.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[p.TP.Topic] = i
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = p.TP.Topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.AcknowledgeErrorCode = p.TP.Partition, p.Code, p.AckCode
		// Apache's schema default: no leader hint (0/0 would name node 0).
		rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
		rp.Records = p.Records
		for _, r := range p.Acquired {
			ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
			ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = r.First, r.Last, r.Deliveries
			rp.AcquiredRecords = append(rp.AcquiredRecords, ar)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return resp
}

func failShareFetch(r kmsg.Request, code int16) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.ErrorCode = code
	return resp
}
