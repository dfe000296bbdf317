// Package txn is the transaction coordinator: one actor per
// transactional.id, the only owner of its state/txncoord state machine
// (spec transactions.md and init-producer-id.md). The Coordinator routes
// requests to those actors through a system.Pool, which spawns them on
// demand from the persisted entry; each actor runs its timeout reaper on
// its own timer and passivates itself when idle. A sweeper actor hands
// expired entries to their actors, and produce verification is answered
// from the persisted entries.
package txn

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/metrics"
	"kaas/model"
	"kaas/model/slots"
	"kaas/model/txnstate"
	"kaas/state/txncoord"
)

// Store is the coordinator's durable state (storage/txnlog.Store).
type Store interface {
	Get(id string) (txnstate.Entry, bool)
	All() []txnstate.Entry
	// Persist makes e durable, then calls done with nil, or with the error
	// that failed it. done may run before Persist returns and on any
	// goroutine; the actor continues when its message arrives.
	Persist(e txnstate.Entry, done func(error))
	// PersistLazily is Persist for a write nothing waits for: it is
	// durable once a later Persist of the same id is (or soon after on
	// its own), and done reports its outcome.
	PersistLazily(e txnstate.Entry, done func(error))
	// Remove deletes id's entry durably (expiry), then calls done as
	// Persist does.
	Remove(id string, done func(error))
	// CoordinatorEpoch is the slot's ownership epoch for id (R-MRK-3).
	CoordinatorEpoch(id string) int32
}

// MarkerWriter delivers transaction markers (R-MRK-1).
type MarkerWriter interface {
	// WriteMarker sends m to the local partition tp; false means the
	// partition no longer exists (the marker is settled, nothing to write).
	WriteMarker(tp model.TopicPartition, m *messages.WriteMarker) bool
	// CompleteTxnOffsets commits or discards a producer's pending group
	// offsets (the markers of the offsets partitions, R-MRK-5).
	CompleteTxnOffsets(producerID int64, epoch int16, commit bool, groups []string, slots []int32, done func(code int16))
}

// Fencer fences a producer epoch everywhere (the fence broadcaster).
type Fencer interface {
	Fence(producerID int64, epoch int16, done func(error))
}

// EndFencer fences the ended epoch of a TV2 transaction on its
// partitions before EndTxn is answered (R-TV2-7): new data batches of
// producerID below epoch are refused there (retries of written batches
// and markers are not). FenceEnd calls done once every partition has
// acknowledged it, or with the error that kept one from it; DropEnd
// tells this broker's partitions it is no longer needed.
type EndFencer interface {
	FenceEnd(producerID int64, epoch int16, partitions []model.TopicPartition, done func(error))
	DropEnd(producerID int64, epoch int16)
}

// Config is what the coordinator needs.
type Config struct {
	Store  Store
	PIDs   txncoord.PIDs
	Fencer Fencer
	// EndFencer (nil: none) lets a TV2 EndTxn be answered once Prepare*
	// is durable and its end fence acknowledged; without it, after the
	// markers.
	EndFencer EndFencer
	Markers   MarkerWriter
	// AbortInterval is how often the reaper looks for overdue transactions
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortInterval time.Duration
	// Expiration drops idle entries (transactional.id.expiration.ms),
	// swept every ExpiryInterval
	// (transaction.remove.expired.transaction.cleanup.interval.ms).
	Expiration     time.Duration
	ExpiryInterval time.Duration
	// IdleActor passivates an actor idle this long in a stable state.
	IdleActor time.Duration
	// MarkerWait bounds how long a request that needs a transition's
	// markers waits for them before it is answered
	// CONCURRENT_TRANSACTIONS, unless the request carries a deadline of
	// its own (R-TXN-2; 0: 5 s). It stands for the client's request
	// timeout, which InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn
	// and EndTxn do not carry: kept below every client's (franz-go waits
	// 10 s beyond a request's own timeout, the Java client 30 s), so the
	// client hears 51 rather than timing out.
	MarkerWait time.Duration
	// Now is the coordinator's clock (nil: time.Now), handed to the state
	// machines and the hold queue.
	Now func() time.Time
	// Owns reports whether this broker coordinates a slot now (nil: every
	// slot, a single broker). No actor starts for an id of another slot.
	Owns    func(slot int) bool
	Metrics *metrics.Metrics
	Logger  *slog.Logger
}

// Coordinator routes to the transactional.id actors.
type Coordinator struct {
	cfg     Config
	sys     *system.System
	log     *slog.Logger
	pool    *system.Pool[*txnActor]
	sweeper *actor.PID
}

// New creates a coordinator; Start resumes unfinished transactions.
func New(sys *system.System, cfg Config) *Coordinator {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AbortInterval <= 0 {
		cfg.AbortInterval = 10 * time.Second
	}
	if cfg.Expiration <= 0 {
		cfg.Expiration = 7 * 24 * time.Hour
	}
	if cfg.ExpiryInterval <= 0 {
		cfg.ExpiryInterval = time.Hour
	}
	if cfg.MarkerWait <= 0 {
		cfg.MarkerWait = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdleActor <= 0 {
		cfg.IdleActor = 5 * time.Minute
	}
	return &Coordinator{cfg: cfg, sys: sys, log: cfg.Logger, pool: system.NewPool[*txnActor](sys)}
}

// Start resumes the transactions of every slot open in the store
// (resume), then starts the expiry sweeper.
func (c *Coordinator) Start() {
	c.resume(func(string) bool { return true })
	sw := &sweeper{c: c}
	pid, err := c.sys.Spawn("txn-expiry", "sweeper", sw, func(*actor.PID) any { return sw.Summary() })
	if err != nil {
		c.log.Error("spawning the transactional id expiry sweeper", "err", err)
		return
	}
	c.sweeper = pid
	c.sys.Every(pid, c.cfg.ExpiryInterval, sweep{})
}

// StartSlot resumes the transactions of slot n, just opened in the store
// (a cluster broker took it over).
func (c *Coordinator) StartSlot(n int) {
	c.resume(func(id string) bool { return slots.Of(id) == n })
}

// StopSlot stops the actors of slot n's transactional ids (the broker
// handed the slot off and routes nothing to them any more); requests they
// were holding back are answered COORDINATOR_NOT_AVAILABLE, so producers
// look for the new coordinator.
func (c *Coordinator) StopSlot(n int) {
	c.pool.StopWhere(func(id string) bool { return slots.Of(id) == n })
}

// resume spawns an actor for every matching entry that is Ongoing (its
// reaper timer must run) or Prepare* (R-TXN-3: the new owner finishes its
// markers).
func (c *Coordinator) resume(match func(id string) bool) {
	for _, e := range c.cfg.Store.All() {
		id := e.TransactionalID
		if !match(id) {
			continue
		}
		switch {
		case e.State.IsPrepare():
			c.log.Info("resuming transaction markers left by a previous run", "transactional_id", id, "state", e.State.String())
			if f := txncoord.ResumeEndFence(e); f != nil && c.cfg.EndFencer != nil {
				// Raised here, before the broker listens (this broker's
				// floor is raised within the call); peers best effort.
				c.cfg.EndFencer.FenceEnd(f.ProducerID, f.Epoch, f.Partitions, func(err error) {
					if err != nil {
						c.log.Info("resumed end fence not acknowledged everywhere", "transactional_id", id, "err", err)
					}
				})
			}
			c.send(id, false, resumeMarkers{})
		case e.State == txnstate.Ongoing:
			if _, err := c.pool.Start(id, c.spawner(id, false)); err != nil {
				c.log.Error("spawning transactional id actor", "transactional_id", id, "err", err)
			}
		}
	}
}

// Stop stops the sweeper and every actor.
func (c *Coordinator) Stop() {
	if c.sweeper != nil {
		c.sys.Stop(c.sweeper)
	}
	c.pool.Stop()
}

// send delivers msg to id's actor, spawning it from the persisted entry
// (or, with create, from none). A passivation under way is waited out.
// False: no actor (no entry and not create, the coordinator stopped, or
// it could not be spawned).
func (c *Coordinator) send(id string, create bool, msg any) bool {
	if u, ok := msg.(system.Undeliverable); ok && c.pool.Closed() {
		// Stopped: a cluster broker handed the slots off (NOT_COORDINATOR).
		u.NotLeader()
		return true
	}
	route, err := c.pool.Send(id, c.spawner(id, create), true, msg)
	if err != nil {
		c.log.Error("spawning transactional id actor", "transactional_id", id, "err", err)
	}
	return route == system.Routed
}

// spawner starts id's actor from its persisted entry, with its reaper
// timer (R-TXN-9: every transaction.abort.timed.out.transaction.
// cleanup.interval.ms, which is also when it checks whether it has been
// idle long enough to passivate). Without create, an id with no entry
// has no actor.
func (c *Coordinator) spawner(id string, create bool) system.Spawner[*txnActor] {
	return func() (*txnActor, bool, error) {
		if c.cfg.Owns != nil && !c.cfg.Owns(slots.Of(id)) {
			return nil, false, nil // handed off: the caller answers NOT_COORDINATOR
		}
		e, exists := c.cfg.Store.Get(id)
		if !exists && !create {
			return nil, false, nil
		}
		a := &txnActor{c: c, id: id, t: txncoord.New(id, e, exists, c.log)}
		a.touch()
		a.publish()
		pid, err := c.sys.Spawn("txn", id, a, func(*actor.PID) any { return a.Summary() })
		if err != nil {
			return nil, false, err
		}
		a.pid = pid // before its timer runs: the actor reads it (PID) only on a tick
		c.sys.Every(pid, c.cfg.AbortInterval, reapTick{})
		return a, true, nil
	}
}

// InitProducerID routes the transactional InitProducerId path.
func (c *Coordinator) InitProducerID(id string, m *messages.InitProducerID) {
	if c.send(id, true, m) {
		return
	}
	m.Reply(kerr.CoordinatorNotAvailable.Code, -1, -1)
}

// AddPartitions routes AddPartitionsToTxn; an unknown id is
// INVALID_PRODUCER_ID_MAPPING (R-TXN-4 step 4).
func (c *Coordinator) AddPartitions(id string, m *messages.AddPartitionsToTxn) {
	if c.send(id, false, m) {
		return
	}
	m.Reply(kerr.InvalidProducerIDMapping.Code, nil)
}

// AddOffsets routes AddOffsetsToTxn.
func (c *Coordinator) AddOffsets(id string, m *messages.AddOffsetsToTxn) {
	if c.send(id, false, m) {
		return
	}
	m.Reply(kerr.InvalidProducerIDMapping.Code)
}

// EndTxn routes EndTxn.
func (c *Coordinator) EndTxn(id string, m *messages.EndTxn) {
	if c.send(id, false, m) {
		return
	}
	m.Reply(kerr.InvalidProducerIDMapping.Code, -1, -1)
}

// VerifyTxn is R-PV-6 for partition actors, answered from the persisted
// entry (persisted before the client heard of the transition). A
// transaction being committed or aborted is NOT_ENOUGH_REPLICAS, which
// producers retry.
func (c *Coordinator) VerifyTxn(id string, producerID int64, epoch int16, topic string, partition int32) int16 {
	tp := model.TopicPartition{Topic: topic, Partition: partition}
	return c.verify(id, producerID, epoch, tp, kerr.NotEnoughReplicas.Code)
}

// VerifyTxnOffsetCommit is R-TXN-11 for TxnOffsetCommit: the group's
// offsets partition must be in the ongoing transaction.
func (c *Coordinator) VerifyTxnOffsetCommit(id string, producerID int64, epoch int16, group string) int16 {
	return c.verify(id, producerID, epoch, txncoord.OffsetsPartition(group), kerr.CoordinatorNotAvailable.Code)
}

func (c *Coordinator) verify(id string, producerID int64, epoch int16, tp model.TopicPartition, inPrepare int16) int16 {
	e, ok := c.cfg.Store.Get(id)
	return txncoord.Verify(e, ok, producerID, epoch, tp, inPrepare)
}

// Entries lists the persisted entries (inspector, DescribeTransactions).
func (c *Coordinator) Entries() []txnstate.Entry { return c.cfg.Store.All() }

// expire hands every entry idle past transactional.id.expiration.ms to
// its actor, which deletes it unless it has moved meanwhile (R-IPI-15).
func (c *Coordinator) expire(now time.Time) (handed int) {
	for _, e := range c.cfg.Store.All() {
		if txncoord.Expired(e, now, c.cfg.Expiration) && c.send(e.TransactionalID, false, expireTick{now: now}) {
			handed++
		}
	}
	return handed
}
