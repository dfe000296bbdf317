package partition

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/state/producers"
	"kaas/storage/partlog"
)

// Partition is the actor. Every field is touched only from Receive, except
// where a comment says otherwise.
type Partition struct {
	cfg       Config
	log       *partlog.Log
	producers *producers.State
	sys       *system.System
	self      *actor.PID

	appends   int                      // appends since the last PrepareSync (group-commit size)
	waiters   []waiter                 // acknowledgements waiting for the high watermark
	unsettled []producers.CompletedTxn // completed by a marker that is not durable yet
	// withheld are fsyncs that finished while the gate was closed:
	// durable, but not made visible (nor acknowledged) until the gate
	// opens again (withholdCheck) or the partition is abandoned.
	withheld  []*partlog.SyncJob
	markerGen uint64 // markers written since the actor started (VerifyRemotely)
	// held are batches of producers with a batch out at the coordinator
	// (VerifyRemotely): they wait here, in order, until it comes back, so
	// a later batch cannot be appended (or refused as out of order)
	// before the first (produce_held.go). nil until the first.
	held map[int64][]*messages.Produce
	// markedOut is, for a producer in held, the marker generation of the
	// last marker written for it while its batch was out: only a marker
	// of that producer ends the transaction its batch was verified in.
	markedOut map[int64]uint64
	// awaiting is, per producer, a TV2 batch waiting for the marker of
	// the producer's transaction open here (produce_await.go).
	awaiting map[int64]*messages.Produce
	// recoveredTxns are producers whose transaction open here was found
	// in the log at start (a restart, a cluster takeover), not appended
	// by this actor: their next batch is verified with the coordinator
	// before it may join it (R-TV2-7: the end fence that refused a late
	// batch of an answered transaction lived on the previous owner).
	recoveredTxns map[int64]bool
	// The flags sit together (no padding after each): every partition,
	// idle or not, has this struct (`kaas bench rss` measures what idle ones
	// cost).
	flushQueued bool // a flushNow is in the mailbox
	flushArmed  bool
	syncAgain   bool // appended while syncing: flush again when it is done
	remove      bool
	retired     bool // closed by Retire: every request is refused
	abandoned   bool // closed without writing: nothing is acknowledged any more

	// syncing is the group commit's fsync running off the actor
	// (flushSoon), nil when none is.
	syncing *syncRun

	// cleaner is the log cleaner's state (compacted partitions only);
	// stopCleaning, read by a running pass, stops it writing.
	cleaner      *cleanerStatus
	stopCleaning atomic.Bool

	// handle holds what is read without asking the actor: its published
	// stats (metrics, the inspector) and the long-poll fetches told of
	// each new view.
	handle *Handle
}

// logger is the partition's logger. It is made for each line rather than
// kept: a logger with an attribute costs about 180 bytes, per partition,
// for lines an idle partition never writes.
func (p *Partition) logger() *slog.Logger {
	return p.cfg.Logger.With("partition", actorName(p.cfg.Topic, p.cfg.Partition))
}

// waiter is an answer to send once the high watermark reaches upTo.
type waiter struct {
	upTo  int64
	reply func(durable bool)
}

// flushNow asks the actor to fsync what it appended (group commit).
type flushNow struct{}

// flushDone reports a background fsync (flush-interval mode): what it
// made durable, or the error that takes the partition offline.
type flushDone struct {
	job *partlog.SyncJob
	err error
}

type flushTick struct{}

// withholdCheck asks again whether a withheld fsync may be made visible.
type withholdCheck struct{}

// withholdRecheck is how often a withheld fsync asks the gate again.
const withholdRecheck = 20 * time.Millisecond

// notLeaderAnswer is a request that can be refused as not led here.
type notLeaderAnswer interface{ NotLeader() }

// Receive dispatches one message.
func (p *Partition) Receive(c actor.Context) {
	if p.retired {
		switch m := c.Message().(type) {
		case notLeaderAnswer:
			m.NotLeader()
		case *system.InspectRequest:
			m.Reply <- p.inspect()
		}
		return
	}
	switch m := c.Message().(type) {
	case *retire:
		p.stopCleaner()
		if m.abandon {
			p.abandon()
		} else {
			p.close()
		}
		p.retired = true
		close(m.done)
	case *actor.Started:
		p.self = c.Self()
	case *messages.Produce:
		p.produce(m)
	case flushNow:
		p.flushQueued = false
		p.flushSoon()
	case *syncRun:
		p.syncFinished(m, true)
	case *messages.WriteMarker:
		p.writeMarker(m)
	case *messages.DeleteRecords:
		p.deleteRecords(m)
	case *messages.DescribeProducers:
		p.describeProducers(m)
	case *messages.UpdateConfig:
		p.updateConfig(m)
	case messages.Tick:
		p.tick(time.Now())
	case messages.Checkpoint:
		// The recovery point and the indexes it vouches for are the
		// owner's to write: with the lease in doubt a peer may own the
		// directory already (as for Close, storage/partlog CloseUnder).
		if p.cfg.Gate != nil && !p.cfg.Gate() {
			break
		}
		if err := p.log.Checkpoint(); err != nil {
			p.fail(err)
		}
	case flushTick:
		p.flushArmed = false
		p.flush()
	case withholdCheck:
		p.releaseWithheld()
	case awaitCheck:
		p.awaitExpired(m)
	case cleanCheck:
		p.cleanCheck(time.Now())
	case *cleanDone:
		p.cleanDone(m)
	case *flushDone:
		if m.err != nil {
			// Acknowledged writes may be lost (that is this mode's
			// bargain): say so, and take no more.
			p.fail(m.err)
			break
		}
		p.log.MarkSynced(m.job)
	case *system.InspectRequest:
		m.Reply <- p.inspect()
	case removeOnStop:
		p.remove = true
	case *actor.Stopping:
		p.close()
	}
}

func (p *Partition) updateConfig(m *messages.UpdateConfig) {
	p.cfg.Log = m.Log
	p.cfg.MaxMessageBytes = m.MaxMessageBytes
	p.cfg.LogAppendTime = m.LogAppendTime
	p.cfg.MinInsyncReplicas = m.MinInsyncReplicas
	p.log.SetConfig(m.Log)
	p.registerCleaner()
}

// flush fsyncs everything appended so far, inline, after the group
// commit's fsync running off the actor if one is (flushSoon, the path of
// every produce with fsync on). Deletions, the flush interval's tick and
// close come here.
func (p *Partition) flush() {
	p.awaitSync()
	job := p.log.PrepareSync()
	if job == nil {
		return
	}
	n := p.appends
	p.appends = 0
	if p.cfg.FlushInterval > 0 {
		// Acknowledgements do not wait for this fsync, so it runs off the
		// actor: a second's worth of appends can take tens of
		// milliseconds to flush, and appends must not queue behind it.
		self, sys, obs := p.self, p.sys, p.cfg.Observer
		go func() {
			start := time.Now()
			err := job.Run()
			obs.Synced(time.Since(start), n)
			sys.Send(self, &flushDone{job: job, err: err})
		}()
		return
	}
	start := time.Now()
	err := job.Run()
	p.cfg.Observer.Synced(time.Since(start), n)
	p.synced(job, err)
}

// synced makes a finished fsync's data visible and releases the
// acknowledgements it covers (or takes the partition offline).
func (p *Partition) synced(job *partlog.SyncJob, err error) {
	if err != nil {
		p.fail(err)
		return
	}
	if !p.open() {
		// Durable, but the lease this partition was claimed under went
		// during the fsync: a peer may own it now and may have sealed
		// the segment before these bytes. Readers must not see them
		// (the chaos checker found a read_uncommitted consumer reading
		// records the next owner's log never held), nor may writers be
		// told they are there: withheld until the gate opens again (the
		// lease was renewed after all) or the partition is abandoned.
		p.log.MarkSynced(job)
		if p.withheld == nil {
			p.armWithholdCheck()
		}
		p.withheld = append(p.withheld, job)
		return
	}
	p.advanceWithheld()
	p.log.Advance(job)
	p.publish()
}

// advanceWithheld makes the withheld fsyncs visible (the gate is open).
func (p *Partition) advanceWithheld() {
	for _, j := range p.withheld {
		p.log.Advance(j)
	}
	p.withheld = nil
}

// releaseWithheld makes a withheld fsync visible once the gate is open
// again, and asks again later while it is not.
func (p *Partition) releaseWithheld() {
	switch {
	case p.withheld == nil || p.abandoned || p.retired:
	case p.open():
		p.advanceWithheld()
		p.publish()
	default:
		p.armWithholdCheck()
	}
}

func (p *Partition) armWithholdCheck() {
	self, sys := p.self, p.sys
	time.AfterFunc(withholdRecheck, func() { sys.Send(self, withholdCheck{}) })
}

// fail takes the partition offline after a failed write or fsync: the
// page cache may have dropped what the failed fsync covered, so no write
// that is not durable yet may ever be acknowledged (a later fsync that
// succeeds proves nothing: Linux reports a writeback error once). Waiting
// writes get KAFKA_STORAGE_ERROR, later ones too, reads as well (as
// Apache does for a partition on a failed log directory); the failure is
// logged, counted and shown by the inspector, and only a restart, which
// recovers the log from what is on disk, brings the partition back.
func (p *Partition) fail(err error) {
	first := p.log.Failed() == nil
	p.log.Fail(err)
	if first {
		p.cfg.Env.Failed("partition", err, "partition", actorName(p.cfg.Topic, p.cfg.Partition))
	}
	for _, w := range p.waiters {
		w.reply(false)
	}
	p.waiters = nil
	p.publish()
}

// armFlush schedules a flushTick (flush-interval mode).
func (p *Partition) armFlush(d time.Duration) {
	if p.flushArmed {
		return
	}
	p.flushArmed = true
	self, sys := p.self, p.sys
	time.AfterFunc(d, func() { sys.Send(self, flushTick{}) })
}

// afterWrite makes new bytes durable or visible according to the mode.
func (p *Partition) afterWrite() {
	p.appends++
	if p.cfg.FlushInterval > 0 {
		p.log.AdvanceToEnd()
		p.publish()
		p.armFlush(p.cfg.FlushInterval)
		return
	}
	p.queueFlush()
}

// queueFlush asks for a group-commit flush unless one is in the mailbox:
// queued behind whatever is already there, so one fsync covers every
// append that arrived before it runs.
func (p *Partition) queueFlush() {
	if !p.flushQueued {
		p.flushQueued = true
		p.sys.Send(p.self, flushNow{})
	}
}

// await answers once the high watermark reaches upTo (at once if it has),
// or with durable=false once the partition is offline.
func (p *Partition) await(upTo int64, reply func(durable bool)) {
	if p.log.HighWatermark() >= upTo {
		reply(true)
		return
	}
	if p.log.Failed() != nil {
		reply(false)
		return
	}
	p.waiters = append(p.waiters, waiter{upTo: upTo, reply: reply})
}

// publish exposes the high watermark and LSO to readers and releases the
// acknowledgements they cover.
func (p *Partition) publish() {
	hw := p.log.HighWatermark()
	keep := p.unsettled[:0]
	for _, t := range p.unsettled {
		if t.LastOffset >= hw {
			keep = append(keep, t)
		}
	}
	p.unsettled = keep
	p.log.Publish(p.lastStableOffset())
	p.handle.watch.notify()
	p.handle.stats.producerIDs.Store(int64(p.producers.Len()))
	n := 0
	for n < len(p.waiters) && p.waiters[n].upTo <= hw {
		p.waiters[n].reply(true)
		n++
	}
	if n > 0 {
		// Clear what the compaction vacates: the array outlives the
		// answered waiters, and a reply holds its produce request and
		// the frame the batch was decoded from.
		rest := copy(p.waiters, p.waiters[n:])
		clear(p.waiters[rest:])
		p.waiters = p.waiters[:rest]
	}
}

// lastStableOffset is R-RC-1: the high watermark, or the first offset of
// the earliest transaction still open or closed by a marker that is not
// durable yet.
func (p *Partition) lastStableOffset() int64 {
	lso := p.log.HighWatermark()
	if first := p.producers.OpenTxnFirstOffset(); first >= 0 && first < lso {
		lso = first
	}
	for _, t := range p.unsettled {
		if t.FirstOffset < lso {
			lso = t.FirstOffset
		}
	}
	return lso
}

func (p *Partition) deleteRecords(m *messages.DeleteRecords) {
	if !p.open() {
		m.NotLeader()
		return
	}
	off := m.Offset
	if off == -1 {
		off = p.log.HighWatermark()
	}
	// The gate is asked again once the new log start is durable: as an
	// append's, an answer must not outlive the lease it was written under.
	p.awaitSync()
	if err := p.log.DeleteRecordsBefore(off, p.open); err != nil {
		if errors.Is(err, partlog.ErrOffsetOutOfRange) {
			p.logger().Warn("DeleteRecords rejected", "offset", m.Offset, "err", err)
			m.Reply(messages.DeleteRecordsResult{ErrorCode: offsetOutOfRange, LowWatermark: -1})
			return
		}
		if errors.Is(err, partlog.ErrLogStartInDoubt) {
			// Durable, but a peer may lead the partition now, taken over
			// from the files as they were before: whether the records are
			// gone there is not known here. REQUEST_TIMED_OUT, as for an
			// append whose lease went before its answer; a retry settles it.
			p.logger().Warn("DeleteRecords not acknowledged: the lease fell in doubt while the log start was written", "offset", off)
			m.Reply(messages.DeleteRecordsResult{ErrorCode: kerr.RequestTimedOut.Code, LowWatermark: -1})
			return
		}
		p.fail(err)
		m.Reply(messages.DeleteRecordsResult{ErrorCode: kerr.KafkaStorageError.Code, LowWatermark: -1})
		return
	}
	p.flush() // the directory without the deleted segments
	p.publish()
	m.Reply(messages.DeleteRecordsResult{LowWatermark: p.log.LogStartOffset()})
}

func (p *Partition) tick(now time.Time) {
	if !p.open() {
		// Cluster mode, lease not certainly alive: a peer may own the
		// partition now, and retention must not delete its files.
		return
	}
	p.awaitSync() // no segment goes while the group commit's fsync may hold it
	if deleted, err := p.log.EnforceRetention(now); err != nil {
		p.fail(err)
	} else if deleted > 0 {
		p.flush() // the directory without the deleted segments
	}
	if p.cfg.ProducerIDExpiration > 0 {
		p.producers.Expire(now.Add(-p.cfg.ProducerIDExpiration).UnixMilli())
	}
	p.publish()
}

// abandon closes the log's files without writing (the lease is gone);
// whoever waits for an fsync is told to re-route.
func (p *Partition) abandon() {
	p.awaitSync()
	p.stopCleaner()
	p.abandoned = true
	p.log.Abandon()
	for _, w := range p.waiters {
		w.reply(false)
	}
	p.waiters = nil
}

func (p *Partition) close() {
	p.awaitSync()
	p.stopCleaner()
	p.answerHeld()
	// Close fsyncs everything written, so the snapshot may cover the whole
	// log even if the last appends never had their own flush. It asks the
	// lease gate before writing (a graceful hand-off whose lease fell in
	// doubt meanwhile closes as an abandon, and acknowledges nothing).
	err := p.log.CloseUnder(p.open)
	if err == nil {
		err = p.saveSnapshot()
	}
	if err != nil {
		p.logger().Error("closing partition: not everything written is durable", "err", err)
		p.handle.closeErr.Store(&err)
	}
	// Close fsynced everything written: whoever still waits is durable,
	// unless that fsync failed.
	for _, w := range p.waiters {
		w.reply(err == nil)
	}
	p.waiters = nil
	if p.remove {
		// A deleted topic's directory is removed only by a broker sure it
		// still owns it: directories are named by topic and partition, so
		// a broker whose lease went (paused through a deletion) could
		// otherwise remove the directory of the same name that a peer
		// opened for the topic created again meanwhile, acknowledged
		// records and all. Left behind, the directory is the next owner's
		// to find (docs/cluster.md).
		if errors.Is(err, partlog.ErrClosedInDoubt) || !p.open() {
			p.logger().Warn("deleted topic's partition directory left in place: the lease is in doubt, a peer may own the directory now")
		} else if err := p.log.Remove(); err != nil {
			p.logger().Error("removing partition directory", "err", err)
		}
	}
}
