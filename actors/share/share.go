// Package share is the share coordinator actor: the only owner of this
// broker's share groups (state/sharegroup) — membership, share sessions
// and every share-partition's acquisition state. Heartbeats, fetches,
// acknowledgements and timer expiries arrive as messages, so the state
// machines run on one goroutine at a time without locks.
//
// A fetch reads the partition's log through its published view from
// inside the actor: the acquisition and the bytes handed out with it must
// come from the same state, and the view is safe to read from anywhere.
// The actor never waits for data: a fetch that acquired nothing is
// answered with what to wait on, and the handler asks again (Retry).
package share

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/model"
	"kaas/state/sharegroup"
	"kaas/state/sharepartition"
	"kaas/storage/partlog"
	"kaas/storage/sharestate"
	"kaas/storage/slotlog"
)

// Partition is a partition as the share coordinator reads it.
type Partition struct {
	Topic string
	// View is the log's latest published view.
	View func() *partlog.View
}

// Config is what the actor needs.
type Config struct {
	Groups sharegroup.Config
	// PerGroup are the groups with their own configs at start (GROUP
	// config resources); messages.ShareGroupConfigs replaces them.
	PerGroup map[string]sharegroup.Config
	Topics   sharegroup.Topics
	// Resolve finds a partition led here, or the code to answer for it
	// (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER...). Safe
	// from any goroutine.
	Resolve func(tp model.TopicIDPartition) (Partition, int16)
	// Store is where a single broker persists share-partitions; Loaded
	// what it held at start. A cluster broker has none: each partition's
	// log comes with the partition (stores.go).
	Store  *sharestate.Store
	Loaded map[sharestate.Key]sharestate.Record
	Logger *slog.Logger
	// Synced, if not nil, is told how long each fsync of a share state
	// log took and how many answers it covered.
	Synced func(d time.Duration, appends int)
	// FlushInterval > 0 is --flush-interval-ms (Apache's
	// log.flush.interval.ms applies to the share state too): an
	// acknowledgement is answered once it is in its share state log, and
	// the log is fsynced within the interval (slotlog.Group.FlushEvery).
	FlushInterval time.Duration
}

// Listing is one share group as ListGroups shows it.
type Listing struct{ ID, State string }

// Handle is how the broker reaches the actor.
type Handle struct {
	pid     *actor.PID
	sys     *system.System
	listing atomic.Pointer[[]Listing]
}

// Send delivers a message to the actor.
func (h *Handle) Send(msg any) { h.sys.Send(h.pid, msg) }

// Stop stops the actor after the messages already queued, and waits.
func (h *Handle) Stop() { h.sys.Stop(h.pid) }

// Groups lists the share groups as of the last message handled.
func (h *Handle) Groups() []Listing {
	if l := h.listing.Load(); l != nil {
		return *l
	}
	return nil
}

// Spawn starts the actor as share/coordinator.
func Spawn(sys *system.System, cfg Config) (*Handle, error) {
	h := &Handle{sys: sys}
	a := &shareActor{cfg: cfg, h: h, sys: sys, c: sharegroup.New(cfg.Groups, cfg.Topics), released: make(chan struct{}),
		dirty: map[sharestate.Key]*sharepartition.Partition{}, stores: map[model.TopicIDPartition]partStore{}, recBytes: map[model.TopicIDPartition]int64{}, reads: map[model.TopicIDPartition]*cachedRead{}}
	pid, err := sys.Spawn("share", "coordinator", a, sys.Inspect)
	if err != nil {
		return nil, err
	}
	h.pid = pid
	return h, nil
}

type shareActor struct {
	cfg  Config
	h    *Handle
	sys  *system.System
	self *actor.PID
	c    *sharegroup.Coordinator

	// dirty are the share-partitions changed by the message at hand, to
	// persist; synced says an acknowledgement is among the changes, so
	// the answer waits for the fsync.
	dirty  map[sharestate.Key]*sharepartition.Partition
	synced bool
	// syncs is group commit on the share state log: an answer that
	// acknowledged records waits for an fsync that runs off the actor
	// (fetches are served meanwhile); the acknowledgements handled while
	// one runs share the next.
	syncs slotlog.Group
	// mailbox is the actor's own, looked up at its first flush: an
	// fsync runs inline only when nothing waits in it.
	mailbox *system.MailboxStats
	// stores are the share state logs of the partitions owned here
	// (cluster; stores.go).
	stores map[model.TopicIDPartition]partStore

	// released is closed (and replaced) when a record became available
	// again or the window moved, waking the fetches that found nothing.
	released chan struct{}
	wake     bool

	// recBytes is each partition's recent bytes per record, to size reads;
	// reads the last batches read of some partitions (readcache.go).
	recBytes map[model.TopicIDPartition]int64
	reads    map[model.TopicIDPartition]*cachedRead

	timer    *time.Timer
	timerAt  time.Time
	timerGen uint64

	// closing: logs are being closed (a partition given up, the actor
	// stopping); the fetches their last fsyncs answer acquire nothing.
	closing bool
}

// tick is the timer's expiry; stale ones (gen) are ignored.
type tick struct{ gen uint64 }

// flushDue is the flush-interval mode's tick (slotlog.Group.FlushEvery).
type flushDue struct{}

func (a *shareActor) Receive(ctx actor.Context) {
	now := time.Now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.syncs.FlushEvery(a.cfg.FlushInterval, func(d time.Duration) {
			sys, self := a.sys, a.self
			time.AfterFunc(d, func() { sys.Send(self, flushDue{}) })
		})
		a.restore()
	case *actor.Stopping:
		if a.timer != nil {
			a.timer.Stop()
		}
		a.closeStores()
		return
	case *actor.Stopped, *actor.Restarting:
		return
	case *messages.ShareHeartbeat:
		res := a.c.Heartbeat(m.Request, now)
		if m.Request.Epoch == -1 && res.Code == 0 {
			a.wake = true
		}
		m.Reply(res)
	case *messages.ShareFetch:
		if a.cfg.Store != nil && a.cfg.Store.Failed() != nil {
			// The share state log is offline after a disk error: nothing
			// more may be acknowledged until a restart recovers it.
			m.Reply(messages.ShareFetchResult{Code: kerr.KafkaStorageError.Code})
			break
		}
		res, sess := a.fetch(m, now)
		if sess != nil && !a.synced {
			a.acquireAll(m, sess, &res, now)
			sess = nil
		}
		reply := m.Reply
		if sess != nil {
			// The fetch carried acknowledgements its answer waits for:
			// it acquires once they are durable (acquireAfterSync).
			reply = func(res messages.ShareFetchResult) { m.Reply(a.acquireAfterSync(m, sess, res)) }
		}
		if wait := a.persist(&res, false); len(wait) > 0 {
			a.awaitSync(res, wait, reply)
		} else {
			reply(res)
		}
	case flushDue:
		a.compacted(a.syncs.FlushDue(a.cfg.Synced, a.deliver))
	case *slotlog.Synced:
		a.compacted(a.syncs.Done(m, a.cfg.Synced, a.deliver))
	case *messages.ShareConnectionClosed:
		if a.c.ConnectionClosed(m.Group, m.Member, m.Owner, now) {
			a.wake = true
		}
	case *messages.ShareDescribe:
		ids := m.Groups
		if ids == nil {
			ids = a.c.Groups()
		}
		out := make([]sharegroup.Description, 0, len(ids))
		for _, id := range ids {
			if d := a.c.Describe(id, m.Records); d != nil {
				out = append(out, *d)
			} else {
				out = append(out, sharegroup.Description{ID: id, State: "Dead"})
			}
		}
		m.Reply(out)
	case *messages.ShareGroupConfigs:
		a.c.SetGroupConfigs(m.PerGroup)
	case *messages.ShareAlterOffsets:
		code, codes := a.alter(m)
		m.Reply(code, codes)
	case *messages.ShareDeleteOffsets:
		m.Reply(a.deleteOffsets(m))
	case *messages.ShareDeleteGroup:
		m.Reply(a.deleteGroup(m.Group))
	case *openPartition:
		a.openPartition(m)
	case *closePartition:
		a.closePartition(m)
	case *unloadMembers:
		a.unloadMembers(m)
	case *system.InspectRequest:
		m.Reply <- a.view()
		return
	case statsRequest:
		m.Reply <- a.stats()
		return
	case tick:
		if m.gen != a.timerGen {
			return
		}
		a.timer, a.timerAt = nil, time.Time{}
		if a.c.Expire(now) {
			a.wake = true
		}
	default:
		a.cfg.Logger.Warn("share coordinator got an unknown message", "type", fmt.Sprintf("%T", m))
		return
	}
	a.after()
}

// after publishes the listing, wakes waiting fetches and sets the timer
// for the next deadline.
func (a *shareActor) after() {
	ids := a.c.Groups()
	l := make([]Listing, 0, len(ids))
	for _, id := range ids {
		l = append(l, Listing{ID: id, State: a.c.Group(id).State()})
	}
	a.h.listing.Store(&l)
	a.flush()
	if a.wake {
		close(a.released)
		a.released, a.wake = make(chan struct{}), false
	}
	d, ok := a.c.NextDeadline()
	if !ok || (a.timer != nil && !d.Before(a.timerAt)) {
		return
	}
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timerGen++
	gen, self, sys := a.timerGen, a.self, a.sys
	a.timerAt = d
	a.timer = time.AfterFunc(time.Until(d), func() { sys.Send(self, tick{gen: gen}) })
}

// fetch takes a fetch's session step and applies its acknowledgements;
// it returns the answer so far and, when the fetch goes on to acquire
// records, its session (acquireAll).
func (a *shareActor) fetch(m *messages.ShareFetch, now time.Time) (messages.ShareFetchResult, *sharegroup.Session) {
	cfg := a.c.ConfigFor(m.Session.Group)
	res := messages.ShareFetchResult{LockDuration: cfg.Partition.LockDuration, Released: a.released}
	r := m.Session
	var sess *sharegroup.Session
	if m.Retry {
		g := a.c.Group(r.Group)
		if g == nil || g.Session(r.Member) == nil {
			return res, nil // the session went away while waiting: an empty answer
		}
		sess = g.Session(r.Member)
	} else {
		var code int16
		if sess, code = a.c.OpenSession(r, now); code != 0 {
			res.Code = code
			return res, nil
		}
		if len(m.Acks) > 0 && a.c.Group(r.Group) == nil {
			res.Code = kerr.GroupIDNotFound.Code
			return res, nil
		}
		for _, ack := range m.Acks {
			code := a.acknowledge(r, ack, m, now)
			if code == 0 {
				sess.HeldUp = 0
			}
			res.Partitions = append(res.Partitions, messages.ShareFetchPartition{TP: ack.TP, AckCode: code})
		}
		if r.Epoch == -1 {
			a.c.CloseSession(r.Group, r.Member, now)
			a.wake = true
			return res, nil
		}
	}
	if m.AckOnly {
		return res, nil
	}
	return res, sess
}

// acquireAfterSync acquires records for a fetch whose acknowledgements
// were just made durable (called from the fsync's answer, on the actor),
// and writes what it changed, as Apache does: its SharePartition moves
// the window only once the acknowledgement is persisted, and the delayed
// share fetch acquires after that. Acquired before the fsync, the
// records sat in the window, locked and undelivered, for the fsync's
// length (p50 2.1 ms of each such fetch in kaas bench share-8, a
// third of the fetches), while the other members' fetches found the
// window full. With the fsync inline (nothing else in the mailbox) no
// other fetch can run meanwhile and this changes nothing but the order.
// Measured in docs/benchmarks.md (share-8). A session gone meanwhile,
// or logs being closed, acquire nothing.
func (a *shareActor) acquireAfterSync(m *messages.ShareFetch, sess *sharegroup.Session, res messages.ShareFetchResult) messages.ShareFetchResult {
	if a.closing || res.Code != 0 {
		return res
	}
	if g := a.c.Group(m.Session.Group); g == nil || g.Session(m.Session.Member) != sess {
		return res
	}
	res.Released = a.released
	a.acquireAll(m, sess, &res, time.Now())
	// Delivery counts are written, not waited for (as acquire's).
	synced := a.synced
	a.synced = false
	a.persist(&res, false)
	a.synced = synced
	return res
}

// acquireAll acquires records for the fetch from each partition of its
// session, into res.
func (a *shareActor) acquireAll(m *messages.ShareFetch, sess *sharegroup.Session, res *messages.ShareFetchResult, now time.Time) {
	r := m.Session
	g := a.c.Group(r.Group)
	budget := m.MaxBytes
	heldUp := false
	for tp := range sess.Partitions {
		if res.Acquired >= m.MaxRecords {
			break
		}
		out := a.acquire(g, tp, r.Member, m, m.MaxRecords-res.Acquired, &budget, now)
		res.Acquired += countRecords(out.Acquired)
		if out.Code != 0 {
			res.Failed = true
		}
		if p := g.Partitions[tp]; len(out.Acquired) == 0 && p != nil && p.HeldUpBy(r.Member, now) {
			heldUp = true
		}
		res.Watch = append(res.Watch, tp)
		merged := false
		for i := range res.Partitions {
			if p := &res.Partitions[i]; p.TP == tp {
				p.Code, p.Records, p.Acquired, p.Release = out.Code, out.Records, out.Acquired, out.Release
				merged = true
			}
		}
		if !merged {
			res.Partitions = append(res.Partitions, out)
		}
	}
	if heldUp && res.Acquired == 0 && !m.HeldUp {
		res.HeldUpWait = heldUpWait << min(sess.HeldUp, heldUpDoublings)
		sess.HeldUp++
	}
}

// A fetch that acquired nothing because its member holds up a full window
// (sharepartition.Partition.HeldUpBy) is answered after heldUpWait rather
// than at its MaxWait: a client sends its acknowledgements on the
// connection the fetch holds (requests are served in order) or, as
// franz-go's share consumer, from the loop that waits for the fetch, so
// until the answer nothing but a lock expiry moves the window, for any
// member of the group (Apache holds such a fetch to its MaxWait; MaxWait
// allows answering early). A fetch already waiting whose member comes to
// hold up the window (the acknowledgement of another member moved the
// start to its records, and the others took the room) gets the same
// bound when it asks again (Retry): franz-go's share consumer sends its
// next fetch as soon as a poll takes the records, often before they are
// acknowledged, so that fetch waits with the acknowledgements held back
// behind it, and all eight members of share-8 sat out their 500 ms
// MaxWait together, a few times a second. Measured with kaas bench share-8 (--sides
// kaas, 5 runs each, load average 18–27): 305 k records/s median waiting
// to MaxWait (500 ms, franz-go's share consumer's default), 820 k with a
// fixed 5 ms, 860 k answering at once. Each further such answer without
// an acknowledgement from the member in between waits twice as long (up
// to heldUpWait << heldUpDoublings, 5 s, or the MaxWait): a member that
// holds its records for long, processing them, costs a few empty
// fetches, not one every 5 ms, and its acknowledgement, once made, waits
// at most about as long as it had held them.
const (
	heldUpWait      = 5 * time.Millisecond
	heldUpDoublings = 10
)

func countRecords(rs []sharepartition.Range) int {
	n := 0
	for _, r := range rs {
		n += int(r.Last - r.First + 1)
	}
	return n
}

// acknowledge applies one partition's acknowledgements.
func (a *shareActor) acknowledge(r sharegroup.SessionRequest, ack messages.ShareAcks, m *messages.ShareFetch, now time.Time) int16 {
	part, code := a.cfg.Resolve(ack.TP)
	if code != 0 {
		return code
	}
	if !m.CanRead(part.Topic) {
		return kerr.TopicAuthorizationFailed.Code
	}
	if _, code := a.storeFor(ack.TP); code != 0 {
		return code
	}
	g := a.c.Group(r.Group)
	p := g.Partitions[ack.TP]
	if p == nil {
		return kerr.InvalidRecordState.Code // nothing was ever acquired here
	}
	spso := p.Start()
	code = p.Acknowledge(r.Member, ack.Batches, m.AllowRenew, now)
	if p.Start() != spso {
		// The window moved: room for new records, which a fetch waiting
		// on a full window may now take (Apache completes its delayed
		// share fetches after an acknowledgement too). A whole batch can
		// fill the window, so without this the next fetch of a member
		// sleeps until its MaxWait.
		a.wake = true
	}
	if code == 0 {
		a.dirty[sharestate.Key{Group: r.Group, Topic: ack.TP.Topic, Partition: ack.TP.Partition}] = p
		a.synced = true
	}
	if code != 0 {
		a.cfg.Logger.Info("share acknowledgement refused", "group", r.Group, "member", r.Member, "topic", part.Topic,
			"partition", ack.TP.Partition, "code", kerr.ErrorForCode(code).Error())
		return code
	}
	for _, b := range ack.Batches {
		for _, t := range b.Types {
			if t == sharepartition.Release {
				a.wake = true
			}
		}
	}
	return 0
}

// acquire hands member records of one partition, with their bytes.
func (a *shareActor) acquire(g *sharegroup.Group, tp model.TopicIDPartition, member string, m *messages.ShareFetch, maxRecords int, budget *int32, now time.Time) messages.ShareFetchPartition {
	out := messages.ShareFetchPartition{TP: tp}
	part, code := a.cfg.Resolve(tp)
	if code != 0 {
		out.Code = code
		return out
	}
	if !m.CanRead(part.Topic) {
		out.Code = kerr.TopicAuthorizationFailed.Code
		return out
	}
	if _, code := a.storeFor(tp); code != 0 {
		out.Code = code
		return out
	}
	v := part.View()
	if v.Offline != nil {
		out.Code = kerr.KafkaStorageError.Code
		return out
	}
	cfg := a.c.ConfigFor(g.ID)
	p := g.Partition(cfg.Partition, tp, func() int64 { return a.startOffset(cfg, v, part.Topic, tp, now) })
	upTo := v.HighWatermark
	if cfg.ReadCommitted {
		upTo = v.LastStable
	}
	if p.Start() < v.LogStart || p.Start() > v.HighWatermark {
		// Records deleted below the window (retention, DeleteRecords), or
		// a log cut below it: the window starts again where the log is.
		a.cfg.Logger.Info("share-partition start outside the log; moving it", "group", g.ID, "topic", part.Topic,
			"partition", tp.Partition, "spso", p.Start(), "log_start", v.LogStart, "high_watermark", v.HighWatermark)
		p.Reset(min(max(p.Start(), v.LogStart), v.HighWatermark))
	}
	from := p.FetchOffset(now)
	if from >= upTo || *budget <= 0 {
		return out
	}
	// A read sized for the records this fetch can acquire, not for the
	// request's byte budget (tens of MiB): acquisitions stop at MaxRecords
	// and the in-flight bound anyway, and reading and parsing the rest for
	// nothing cost 200 ms a fetch on a long partition. The offsets wanted
	// are those left in the window past from (released or expired ones
	// among them) and the new ones the bound allows; their size comes from
	// the partition's recent bytes per record. minReadBytes more, since a
	// batch-optimised acquisition takes whole the batch that reaches the
	// limit: a read that stops short of it hands out fewer records.
	span := int64(min(maxRecords, p.Room()))
	if end := p.End(); end >= from {
		span += end - from + 1
	}
	size := min(int64(*budget), readBytes, span*a.recordBytes(tp)+minReadBytes)
	data, batches, spans, cached, err := a.read(tp, v, from, int32(size), upTo, int64(min(maxRecords, p.Room())))
	if errors.Is(err, partlog.ErrOffsetOutOfRange) {
		return out
	}
	if err != nil {
		a.cfg.Logger.Error("share fetch read failed", "topic", part.Topic, "partition", tp.Partition, "err", err)
		out.Code = kerr.KafkaStorageError.Code
		return out
	}
	if cfg.ReadCommitted && len(batches) > 0 {
		batches = slices.Clone(batches) // the read cache's are shared
		markAborted(batches, spans, v.AbortedTxns(from, batches[len(batches)-1].Last+1))
	}
	out.Acquired = p.Acquire(member, batches, sharepartition.Want{MaxRecords: maxRecords, BatchSize: m.BatchSize, Mode: m.Mode}, now)
	if len(out.Acquired) == 0 {
		return out
	}
	// Delivery counts are written, not waited for: a crash before the
	// next fsync delivers these records again with their old count.
	a.dirty[sharestate.Key{Group: g.ID, Topic: tp.Topic, Partition: tp.Partition}] = p
	first, last := out.Acquired[0].First, out.Acquired[len(out.Acquired)-1].Last
	lo, hi := -1, 0
	for i, b := range batches {
		if b.Last >= first && b.First <= last {
			if lo < 0 {
				lo = spans[i].start
			}
			hi = spans[i].end
		}
	}
	out.Records = data[lo:hi]
	out.Release = cached.hold()
	*budget -= int32(hi - lo)
	return out
}

// readBytes bounds one share-partition's read per fetch (Apache's
// consumer default max.partition.fetch.bytes); minReadBytes is the least
// read, and defaultRecordBytes the size guessed for a partition's records
// before one was read.
const (
	readBytes          = 1 << 20
	minReadBytes       = 16 << 10
	defaultRecordBytes = 1 << 10
)

// recordBytes is a partition's recent bytes per record (batch overhead
// included).
func (a *shareActor) recordBytes(tp model.TopicIDPartition) int64 {
	if n := a.recBytes[tp]; n > 0 {
		return n
	}
	return defaultRecordBytes
}

// learnRecordBytes folds what a read found into the partition's bytes
// per record (a moving average: records change size slowly).
func (a *shareActor) learnRecordBytes(tp model.TopicIDPartition, bs []sharepartition.Batch, ss []span) {
	if len(bs) == 0 {
		return
	}
	bytes := int64(ss[len(ss)-1].end - ss[0].start)
	n := bs[len(bs)-1].Last - bs[0].First + 1
	if n <= 0 {
		return
	}
	per := max(1, (bytes+n-1)/n)
	if old := a.recBytes[tp]; old > 0 {
		per = (3*old + per + 3) / 4
	}
	a.recBytes[tp] = per
}

type span struct {
	start, end  int
	producerID  int64
	transaction bool
}

// batchesOf lists the record batches of data (whole batches, as a view
// reads them).
func batchesOf(data []byte) ([]sharepartition.Batch, []span) {
	var bs []sharepartition.Batch
	var ss []span
	for pos := 0; pos < len(data); {
		h, err := partlog.ParseBatchHeader(data[pos:])
		if err != nil || pos+int(h.Size()) > len(data) {
			break
		}
		bs = append(bs, sharepartition.Batch{First: h.BaseOffset, Last: h.LastOffset()})
		ss = append(ss, span{start: pos, end: pos + int(h.Size()), producerID: h.ProducerID, transaction: h.IsTransactional() && !h.IsControl()})
		pos += int(h.Size())
	}
	return bs, ss
}

// markAborted marks the data batches of aborted transactions.
func markAborted(bs []sharepartition.Batch, ss []span, aborted []partlog.AbortedTxn) {
	for i := range bs {
		if !ss[i].transaction {
			continue
		}
		for _, t := range aborted {
			if t.ProducerID == ss[i].producerID && t.FirstOffset <= bs[i].First && bs[i].First < t.LastOffset {
				bs[i].Aborted = true
			}
		}
	}
}

// restore rebuilds the share-partitions recovered from disk at start (a
// single broker), each with its group's configuration.
func (a *shareActor) restore() {
	a.c.SetGroupConfigs(a.cfg.PerGroup)
	a.load(a.cfg.Loaded)
	a.cfg.Loaded = nil
}

// load puts share-partitions read from a share state log back: records
// that were acquired are Available again with their delivery counts kept
// (locks are not persisted, as in Apache).
func (a *shareActor) load(loaded map[sharestate.Key]sharestate.Record) {
	for k, r := range loaded {
		snap := sharepartition.Snapshot{Start: r.Start, Runs: make([]sharepartition.Run, len(r.Runs))}
		for i, run := range r.Runs {
			snap.Runs[i] = sharepartition.Run{First: run.First, Last: run.Last, State: sharepartition.State(run.State), Deliveries: run.Deliveries}
		}
		a.c.Restore(k.Group, model.TopicIDPartition{Topic: k.Topic, Partition: k.Partition}, sharepartition.Restore(snap, a.c.ConfigFor(k.Group).Partition))
	}
	if n := len(loaded); n > 0 {
		a.cfg.Logger.Info("loaded share-partitions", "share_partitions", n)
	}
}

// startOffset is where a new share-partition starts, by the group's
// share.auto.offset.reset: the log start, the high watermark, or the
// first record whose timestamp is at most ResetBy before now (the high
// watermark when there is none, as Apache's by_duration).
func (a *shareActor) startOffset(cfg sharegroup.Config, v *partlog.View, topic string, tp model.TopicIDPartition, now time.Time) int64 {
	switch cfg.AutoOffsetReset {
	case "earliest":
		return v.LogStart
	case "by_duration":
		off, _, found, err := v.OffsetForTimestamp(now.Add(-cfg.ResetBy).UnixMilli(), v.HighWatermark)
		if err != nil {
			a.cfg.Logger.Warn("share-partition start by duration: timestamp lookup failed; starting at the high watermark",
				"topic", topic, "partition", tp.Partition, "err", err)
		}
		if found && err == nil {
			return max(off, v.LogStart)
		}
	}
	return v.HighWatermark
}

// persist writes the share-partitions the message changed, each to its
// partition's log under its lease (a partition whose lease is in doubt is
// not written, and its acknowledgements are answered
// NOT_LEADER_OR_FOLLOWER). When it acknowledged records the answer must
// wait for an fsync of every log written: with syncNow it is done here,
// else persist returns the logs the caller must wait for (awaitSync). A
// failed write or fsync answers the acknowledgements of that log's
// partitions KAFKA_STORAGE_ERROR (and the log stays offline).
func (a *shareActor) persist(res *messages.ShareFetchResult, syncNow bool) (wait map[*sharestate.Store][]model.TopicIDPartition) {
	if len(a.dirty) == 0 {
		return nil
	}
	acked := a.synced
	a.synced = false
	written := map[*sharestate.Store][]model.TopicIDPartition{}
	for k, p := range a.dirty {
		tp := model.TopicIDPartition{Topic: k.Topic, Partition: k.Partition}
		ps, code := a.storeFor(tp)
		if code == 0 {
			if err := ps.store.Put(record(k, p.Snapshot())); err != nil {
				a.storageFailed(err, res, []model.TopicIDPartition{tp}, acked)
				continue
			}
			written[ps.store] = append(written[ps.store], tp)
			continue
		}
		if acked {
			failAcks(res, []model.TopicIDPartition{tp}, code)
		}
	}
	clear(a.dirty)
	if !acked || len(written) == 0 {
		return nil
	}
	if !syncNow {
		return written
	}
	for st, tps := range written {
		if err := a.syncInline(st); err != nil {
			a.storageFailed(err, res, tps, true)
			continue
		}
		a.failInDoubt(res, tps)
	}
	return nil
}

// failInDoubt answers the acknowledgements of those of tps whose lease
// fell in doubt while their write was made durable. A peer may have
// taken the partition over and sealed its share log before the write got
// there, so whether the successor has it is unknown (as for an append
// whose lease went, docs/cluster.md) and the answer must not say done:
// NOT_LEADER_OR_FOLLOWER, as storeFor answers a write that cannot
// start, sends the client to the partition's leader. (The change stays
// in this broker's memory; a failed acknowledgement may or may not have
// taken effect, as Kafka's clients assume.)
func (a *shareActor) failInDoubt(res *messages.ShareFetchResult, tps []model.TopicIDPartition) {
	if doubt := a.inDoubt(tps); len(doubt) > 0 {
		failAcks(res, doubt, kerr.NotLeaderForPartition.Code)
	}
}

// inDoubt is those of tps whose partition's lease gate is closed now,
// logged: their share state was written under a lease that may have
// expired since.
func (a *shareActor) inDoubt(tps []model.TopicIDPartition) []model.TopicIDPartition {
	var doubt []model.TopicIDPartition
	for _, tp := range tps {
		if ps, ok := a.stores[tp]; ok && ps.gate != nil && !ps.gate() {
			doubt = append(doubt, tp)
		}
	}
	if len(doubt) > 0 {
		a.cfg.Logger.Warn("share state fsynced after its partition's lease fell in doubt; not answered as done", "partitions", len(doubt))
	}
	return doubt
}

// failAcks answers the acknowledgements of tps with code.
func failAcks(res *messages.ShareFetchResult, tps []model.TopicIDPartition, code int16) {
	for i := range res.Partitions {
		if p := &res.Partitions[i]; p.AckCode == 0 && slices.Contains(tps, p.TP) {
			p.AckCode = code
		}
	}
}

func (a *shareActor) storageFailed(err error, res *messages.ShareFetchResult, tps []model.TopicIDPartition, acked bool) {
	a.cfg.Logger.Error("share state write failed; its share-partitions are offline until a restart", "err", err)
	if acked {
		failAcks(res, tps, kerr.KafkaStorageError.Code)
	}
}

// awaitSync holds an answer until an fsync of every log in wait covers
// what it acknowledged; after() starts the fsyncs (slotlog.Group), off
// the actor.
func (a *shareActor) awaitSync(res messages.ShareFetchResult, wait map[*sharestate.Store][]model.TopicIDPartition, reply func(messages.ShareFetchResult)) {
	n := len(wait)
	for st, tps := range wait {
		a.syncs.Wait(st, st.Log(), func(err error) {
			if err != nil {
				a.storageFailed(err, &res, tps, true)
			} else {
				a.failInDoubt(&res, tps)
			}
			if n--; n == 0 {
				reply(res)
			}
		})
	}
}

// compacted logs a failed compaction of the share state log (FlushDue's
// or Done's): the store is offline after it.
func (a *shareActor) compacted(err error) {
	if err != nil {
		a.cfg.Logger.Error("share state compaction failed; share groups are offline until a restart", "err", err)
	}
}

// flush starts the fsyncs the answers waiting need: inline when nothing
// else waits in the mailbox and one log alone needs one
// (slotlog.Group.FlushIdle says why), else each off the actor. A lone
// consumer's fetch carries its previous poll's acknowledgements and waits
// for their fsync with nothing queued behind it: off the actor the fsync
// cost a goroutine start and a message back through the mailbox (two
// wake-ups, and the spinning threads they bring) on every poll's path.
func (a *shareActor) flush() {
	if a.mailbox == nil {
		if i, ok := a.sys.LookupPID(a.self); ok {
			a.mailbox = i.Mailbox
		}
	}
	a.compacted(a.syncs.FlushIdle(a.mailbox != nil && a.mailbox.Depth() == 0, a.cfg.Synced, a.deliver))
}

// deliver hands a finished fsync back to the actor.
func (a *shareActor) deliver(s *slotlog.Synced) { a.sys.Send(a.self, s) }

// syncInline fsyncs a share state log on the actor, for the rare changes
// answered only once durable (offsets altered or deleted, a group
// deleted): the fsync running off the actor is waited for first, and the
// answers waiting on the log are answered with this one.
func (a *shareActor) syncInline(st *sharestate.Store) error {
	a.syncs.Release(st.Log(), a.cfg.Synced)
	return st.Sync()
}

func record(k sharestate.Key, s sharepartition.Snapshot) sharestate.Record {
	r := sharestate.Record{Key: k, Start: s.Start, Runs: make([]sharestate.Run, len(s.Runs))}
	for i, run := range s.Runs {
		r.Runs[i] = sharestate.Run{First: run.First, Last: run.Last, State: int8(run.State), Deliveries: run.Deliveries}
	}
	return r
}

// alter is AlterShareGroupOffsets for the share-partitions served here;
// the new starts are fsynced before the answer.
func (a *shareActor) alter(m *messages.ShareAlterOffsets) (int16, map[model.TopicIDPartition]int16) {
	if a.cfg.Store != nil && a.cfg.Store.Failed() != nil {
		return kerr.KafkaStorageError.Code, nil
	}
	if g := a.c.Group(m.Group); g != nil && len(g.Members) > 0 {
		return kerr.NonEmptyGroup.Code, nil
	}
	codes := map[model.TopicIDPartition]int16{}
	for tp, off := range m.Offsets {
		if _, code := a.storeFor(tp); code != 0 {
			codes[tp] = code
			continue
		}
		p, code := a.c.AlterStart(m.Group, tp, off)
		codes[tp] = code
		if code == 0 {
			a.dirty[sharestate.Key{Group: m.Group, Topic: tp.Topic, Partition: tp.Partition}] = p
		}
	}
	a.synced = true
	var res messages.ShareFetchResult
	for tp := range codes {
		res.Partitions = append(res.Partitions, messages.ShareFetchPartition{TP: tp})
	}
	a.persist(&res, true)
	for _, p := range res.Partitions {
		if p.AckCode != 0 {
			codes[p.TP] = p.AckCode
		}
	}
	return 0, codes
}

// deleteOffsets is DeleteShareGroupOffsets; the deletions are fsynced
// before the answer.
func (a *shareActor) deleteOffsets(m *messages.ShareDeleteOffsets) int16 {
	if a.cfg.Store != nil && a.cfg.Store.Failed() != nil {
		return kerr.KafkaStorageError.Code
	}
	var gone []model.TopicIDPartition
	for _, t := range m.Topics {
		tps, code := a.c.DeletePartitions(m.Group, t)
		if code != 0 {
			return code
		}
		gone = append(gone, tps...)
	}
	return a.forget(m.Group, gone)
}

// deleteGroup is DeleteGroups for a share group; its share state is
// deleted and fsynced before the answer.
func (a *shareActor) deleteGroup(group string) int16 {
	if a.cfg.Store != nil && a.cfg.Store.Failed() != nil {
		return kerr.KafkaStorageError.Code
	}
	gone, code := a.c.DeleteGroup(group)
	if code != 0 {
		return code
	}
	a.cfg.Logger.Info("deleted share group", "group", group, "share_partitions", len(gone))
	return a.forget(group, gone)
}

// forget deletes share-partitions' persisted state and fsyncs.
func (a *shareActor) forget(group string, gone []model.TopicIDPartition) int16 {
	touched := map[*sharestate.Store]bool{}
	for _, tp := range gone {
		key := sharestate.Key{Group: group, Topic: tp.Topic, Partition: tp.Partition}
		delete(a.dirty, key)
		ps, code := a.storeFor(tp)
		if code != 0 {
			return code
		}
		if err := ps.store.Put(sharestate.Record{Key: key, Deleted: true}); err != nil {
			a.cfg.Logger.Error("share state write failed; its share-partitions are offline until a restart", "err", err)
			return kerr.KafkaStorageError.Code
		}
		touched[ps.store] = true
	}
	for st := range touched {
		if err := a.syncInline(st); err != nil {
			a.cfg.Logger.Error("share state write failed; its share-partitions are offline until a restart", "err", err)
			return kerr.KafkaStorageError.Code
		}
	}
	if len(a.inDoubt(gone)) > 0 {
		return kerr.NotLeaderForPartition.Code // see failInDoubt
	}
	return 0
}
