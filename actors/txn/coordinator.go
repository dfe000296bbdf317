// Package txn is the transaction coordinator: one actor per
// transactional.id, the only owner of its state/txncoord state machine
// (spec transactions.md and init-producer-id.md). The Coordinator routes
// requests to those actors, spawning them on demand from the persisted
// entry and passivating idle ones, drives the timeout reaper and the
// expiry sweep, and answers transactional produce verification from the
// persisted entries.
package txn

import (
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/metrics"
	"kaas/state/txncoord"
	"kaas/storage/txnlog"
)

// Store is the coordinator's durable state (storage/txnlog.Store).
type Store interface {
	Get(id string) (txnlog.Entry, bool)
	All() []txnlog.Entry
	// Persist makes e durable, then calls done with nil, or with the error
	// that failed it. done may run before Persist returns and on any
	// goroutine; the actor continues when its message arrives.
	Persist(e txnlog.Entry, done func(error))
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
	WriteMarker(tp txnlog.TopicPartition, m *messages.WriteMarker) bool
	// CompleteTxnOffsets commits or discards a producer's pending group
	// offsets (the markers of the offsets partitions, R-MRK-5).
	CompleteTxnOffsets(producerID int64, epoch int16, commit bool, groups []string, done func(code int16))
}

// Fencer fences a producer epoch everywhere (the fence broadcaster).
type Fencer interface {
	Fence(producerID int64, epoch int16, done func(error))
}

// Config is what the coordinator needs.
type Config struct {
	Store   Store
	PIDs    txncoord.PIDs
	Fencer  Fencer
	Markers MarkerWriter
	// AbortInterval is how often the reaper looks for overdue transactions
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	AbortInterval time.Duration
	// Expiration drops idle entries (transactional.id.expiration.ms).
	Expiration time.Duration
	// IdleActor passivates an actor idle this long in a stable state.
	IdleActor time.Duration
	Metrics   *metrics.Metrics
	Logger    *slog.Logger
}

// Coordinator routes to the transactional.id actors.
type Coordinator struct {
	cfg  Config
	sys  *system.System
	log  *slog.Logger
	mu   sync.Mutex
	live map[string]*liveActor
	stop chan struct{}
	done chan struct{}
}

type liveActor struct {
	pid      *actor.PID
	actor    *txnActor
	stopping chan struct{} // closed once a passivated actor has stopped
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
	if cfg.IdleActor <= 0 {
		cfg.IdleActor = 5 * time.Minute
	}
	return &Coordinator{cfg: cfg, sys: sys, log: cfg.Logger, live: map[string]*liveActor{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start spawns an actor for every entry that is Ongoing (the reaper must
// see it) or Prepare* (R-TXN-3: the new owner finishes its markers), then
// starts the reaper.
func (c *Coordinator) Start() {
	for _, e := range c.cfg.Store.All() {
		if e.State == txnlog.Ongoing || e.State.IsPrepare() {
			if a := c.actorFor(e.TransactionalID, false); a != nil && e.State.IsPrepare() {
				c.log.Info("resuming transaction markers left by a previous run", "transactional_id", e.TransactionalID, "state", e.State.String())
				c.sys.Send(a, resumeMarkers{})
			}
		}
	}
	go c.housekeeping()
}

// Stop stops the reaper and every actor.
func (c *Coordinator) Stop() {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	live := c.live
	c.live = map[string]*liveActor{}
	c.mu.Unlock()
	for _, la := range live {
		c.sys.Stop(la.pid)
	}
}

// actorFor returns the actor for id, spawning it from the persisted entry.
// With create false, an id without an entry has no actor (nil).
func (c *Coordinator) actorFor(id string, create bool) *actor.PID {
	for {
		c.mu.Lock()
		la, ok := c.live[id]
		if ok && la.stopping != nil {
			c.mu.Unlock()
			<-la.stopping // a passivation is finishing; then respawn
			continue
		}
		if ok {
			c.mu.Unlock()
			return la.pid
		}
		e, exists := c.cfg.Store.Get(id)
		if !exists && !create {
			c.mu.Unlock()
			return nil
		}
		a := &txnActor{c: c, id: id, t: txncoord.New(id, e, exists, c.log)}
		a.touch()
		a.publish()
		pid, err := c.sys.Spawn("txn", id, a, func(*actor.PID) any { return a.Summary() })
		if err != nil {
			c.mu.Unlock()
			c.log.Error("spawning transactional id actor", "transactional_id", id, "err", err)
			return nil
		}
		c.live[id] = &liveActor{pid: pid, actor: a}
		c.mu.Unlock()
		return pid
	}
}

// InitProducerID routes the transactional InitProducerId path.
func (c *Coordinator) InitProducerID(id string, m *messages.InitProducerID) {
	if pid := c.actorFor(id, true); pid != nil {
		c.sys.Send(pid, m)
		return
	}
	m.Reply(kerr.CoordinatorNotAvailable.Code, -1, -1)
}

// AddPartitions routes AddPartitionsToTxn; an unknown id is
// INVALID_PRODUCER_ID_MAPPING (R-TXN-4 step 4).
func (c *Coordinator) AddPartitions(id string, m *messages.AddPartitionsToTxn) {
	if pid := c.actorFor(id, false); pid != nil {
		c.sys.Send(pid, m)
		return
	}
	m.Reply(kerr.InvalidProducerIDMapping.Code, nil)
}

// AddOffsets routes AddOffsetsToTxn.
func (c *Coordinator) AddOffsets(id string, m *messages.AddOffsetsToTxn) {
	if pid := c.actorFor(id, false); pid != nil {
		c.sys.Send(pid, m)
		return
	}
	m.Reply(kerr.InvalidProducerIDMapping.Code)
}

// EndTxn routes EndTxn.
func (c *Coordinator) EndTxn(id string, m *messages.EndTxn) {
	if pid := c.actorFor(id, false); pid != nil {
		c.sys.Send(pid, m)
		return
	}
	m.Reply(kerr.InvalidProducerIDMapping.Code)
}

// VerifyTxn is R-PV-6 for partition actors, answered from the persisted
// entry (persisted before the client heard of the transition). A
// transaction being committed or aborted is NOT_ENOUGH_REPLICAS, which
// producers retry.
func (c *Coordinator) VerifyTxn(id string, producerID int64, epoch int16, topic string, partition int32) int16 {
	tp := txnlog.TopicPartition{Topic: topic, Partition: partition}
	return c.verify(id, producerID, epoch, tp, kerr.NotEnoughReplicas.Code)
}

// VerifyTxnOffsetCommit is R-TXN-11 for TxnOffsetCommit: the group's
// offsets partition must be in the ongoing transaction.
func (c *Coordinator) VerifyTxnOffsetCommit(id string, producerID int64, epoch int16, group string) int16 {
	return c.verify(id, producerID, epoch, txncoord.OffsetsPartition(group), kerr.CoordinatorNotAvailable.Code)
}

func (c *Coordinator) verify(id string, producerID int64, epoch int16, tp txnlog.TopicPartition, inPrepare int16) int16 {
	e, ok := c.cfg.Store.Get(id)
	return txncoord.Verify(e, ok, producerID, epoch, tp, inPrepare)
}

// Entries lists the persisted entries (inspector, DescribeTransactions).
func (c *Coordinator) Entries() []txnlog.Entry { return c.cfg.Store.All() }

// housekeeping runs the timeout reaper (R-TXN-9), passivation of idle
// actors and the hourly expiry sweep (R-IPI-15).
func (c *Coordinator) housekeeping() {
	defer close(c.done)
	reap := time.NewTicker(c.cfg.AbortInterval)
	defer reap.Stop()
	expire := time.NewTicker(time.Hour)
	defer expire.Stop()
	for {
		select {
		case <-c.stop:
			return
		case now := <-reap.C:
			c.mu.Lock()
			for _, la := range c.live {
				if la.stopping == nil {
					c.sys.Send(la.pid, reapTick{now: now})
				}
			}
			c.mu.Unlock()
			c.passivateIdle(now)
		case now := <-expire.C:
			c.expire(now)
		}
	}
}

// passivateIdle asks actors idle past IdleActor to stop. The actor itself
// decides (only a stable, not in-flight entry may go); meanwhile requests
// for its id wait, and afterwards they spawn a fresh actor from the store.
func (c *Coordinator) passivateIdle(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, la := range c.live {
		if la.stopping != nil || la.actor.idleSince(now) <= c.cfg.IdleActor {
			continue
		}
		la := la
		la.stopping = make(chan struct{})
		c.sys.Send(la.pid, passivate{done: func(ok bool) { go c.finishPassivation(la, ok) }})
	}
}

func (c *Coordinator) finishPassivation(la *liveActor, ok bool) {
	if ok {
		c.sys.Stop(la.pid)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok && c.live[la.actor.id] == la {
		delete(c.live, la.actor.id)
	}
	close(la.stopping)
	la.stopping = nil
}

// expire hands every entry idle past transactional.id.expiration.ms to
// its actor, which deletes it unless it has moved meanwhile (R-IPI-15).
func (c *Coordinator) expire(now time.Time) {
	for _, e := range c.cfg.Store.All() {
		if !txncoord.Expired(e, now, c.cfg.Expiration) {
			continue
		}
		if pid := c.actorFor(e.TransactionalID, false); pid != nil {
			c.sys.Send(pid, expireTick{now: now})
		}
	}
}
