// Package partition is the partition actor: one per topic partition, the
// only writer of its log and its producer state. Appends, markers, fences
// and deletions are serialised through it; reads are not — fetch and
// ListOffsets use the log's published view through the Handle.
package partition

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"kaas/actors/system"
	"kaas/messages"
	"kaas/metrics/events"
	"kaas/state/producers"
	"kaas/storage/durable"
	"kaas/storage/partlog"
)

// TxnVerifier answers transactional produce verification (R-PV-6)
// in-process, from the coordinator's published entries.
type TxnVerifier interface {
	// VerifyTxn returns 0 when (pid, epoch) is the current producer of
	// transactionalID and topic/partition is in its ongoing transaction,
	// else the produce error code R-PV-6 gives.
	VerifyTxn(transactionalID string, pid int64, epoch int16, topic string, partition int32) int16
}

// VerifyRemotely is what a TxnVerifier answers when the transaction's
// coordinator is another broker (cluster mode). The actor cannot wait on
// the network, so it answers the Produce with this code and its marker
// generation (ProduceResult.MarkerGen); the broker asks the coordinator
// (AddPartitionsToTxn v4, verify only) and sends the batch again marked
// verified at that generation. A marker of the same producer written
// meanwhile refuses the verified batch (NOT_ENOUGH_REPLICAS, the producer
// retries and is verified again): a late batch of a transaction that was
// just completed can never open a new one here. Never sent to a client.
const VerifyRemotely int16 = -1000

// Config is what a partition actor needs.
type Config struct {
	Topic     string
	Partition int32
	// TopicID is the topic's id, kept in Dir (partlog.ClaimDir): a
	// directory of another id, left by a deleted topic of this name, is
	// removed before the partition opens. Zero: not checked.
	TopicID         [16]byte
	Dir             string
	Log             partlog.Config
	MaxMessageBytes int32
	// LogAppendTime stamps batches with the append time
	// (message.timestamp.type=LogAppendTime).
	LogAppendTime bool
	// MinInsyncReplicas above 1 fails acks=all produce with
	// NOT_ENOUGH_REPLICAS: this broker is the only replica.
	MinInsyncReplicas int32
	// FlushInterval > 0 acknowledges writes before they are fsynced and
	// fsyncs on this interval (log.flush.interval.ms); 0 fsyncs before
	// every acknowledgement, with group commit.
	FlushInterval        time.Duration
	ProducerIDExpiration time.Duration
	Floors               *producers.Floors
	Verifier             TxnVerifier
	// Gate, in cluster mode, reports whether this broker's lease is
	// certainly alive: nothing is appended or acknowledged while it is
	// not (the answer is NOT_LEADER_OR_FOLLOWER). Nil: always open.
	Gate func() bool
	// TakeOver (cluster mode): this broker just became the partition's
	// owner; the previous owner's active segment is sealed and a new one
	// started, so a write the deposed owner started late can never land
	// in a file this broker appends to (partlog.Log.TakeOver).
	TakeOver bool
	// LeaderEpoch is the epoch this broker leads the partition at (the
	// owner key's in cluster mode, 0 for a single broker): stamped into
	// every batch and marker it appends, and recorded in the log's
	// leader-epoch cache from the log end on.
	LeaderEpoch int32
	Logger      *slog.Logger
	Observer    Observer
	// Events records zombie batches rejected (nil: not recorded).
	Events *events.Journal
	// TickInterval is how often the actor gets messages.Tick for its
	// periodic work (retention, segment.ms, producer expiry, snapshots:
	// log.retention.check.interval.ms); 0: never.
	TickInterval time.Duration
	// CheckpointInterval is how often the actor moves its recovery point
	// up to what is fsynced (log.flush.offset.checkpoint.interval.ms,
	// 1 minute); 0: only at shutdown.
	CheckpointInterval time.Duration
	// Cleaner runs log cleaner passes for compacted partitions (nil:
	// never cleaned).
	Cleaner Cleaner
	// Env is the filesystem and corruption policy the log and the
	// producer snapshot are opened with.
	Env durable.Env
}

// Observer receives the partition's measurements (metrics). All methods
// are called from the actor or its fsync goroutine and must not block.
type Observer interface {
	Appended(topic string, partition int32, records int, bytes int)
	Synced(d time.Duration, appends int)
}

type nopObserver struct{}

func (nopObserver) Appended(string, int32, int, int) {}
func (nopObserver) Synced(time.Duration, int)        {}

// Handle is how the rest of the broker reaches a partition.
//
// The actor is parked until its first message: Open recovers the log and
// the producer state and registers the actor (system.Park), but spawns
// it — a protoactor process, mailbox and context, about 850 bytes — only
// when something is sent to it. Reads never need it (they use the
// published view), so an idle partition never has one. Periodic work
// (retention, producer expiry, checkpoints) wakes a parked partition only
// if it holds records or producers: an empty one has nothing to do.
type Handle struct {
	Topic     string
	Partition int32
	// pid is set once the actor is spawned.
	pid atomic.Pointer[actor.PID]
	// mu guards parked, the actor until it is spawned (then nil); while
	// parked nothing else touches it.
	mu        sync.Mutex
	parked    *Partition
	periodic  bool // Tick and Checkpoint registered (under mu)
	sys       *system.System
	published *partlog.Published
	// stats and watch are part of the Handle rather than allocations of
	// their own (two fewer objects for each partition, idle or not).
	stats publishedStats
	watch watchers // long-poll fetches waiting for the next view
	// closeErr is why closing the log failed (set by the actor as it
	// stops, read after Stop returns).
	closeErr atomic.Pointer[error]
}

// Name is the actor's name, e.g. partition/orders-3.
func (h *Handle) Name() string { return "partition/" + actorName(h.Topic, h.Partition) }

func actorName(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

// View is the latest published read view.
func (h *Handle) View() *partlog.View { return h.published.View() }

// Send delivers a message to the partition actor, spawning it if it is
// parked. If there is no actor (stopped or retired) or it cannot be
// spawned (protoactor still holds the name of an earlier ownership's
// actor that is stopping: the next message tries again), a request that
// can be refused is answered NOT_LEADER_OR_FOLLOWER, as a dead letter
// would be.
func (h *Handle) Send(msg any) {
	if m, ok := msg.(*messages.UpdateConfig); ok && h.configureParked(m) {
		return
	}
	if pid := h.actor(); pid != nil {
		h.sys.Send(pid, msg)
	} else if u, ok := msg.(system.Undeliverable); ok {
		u.NotLeader()
	}
}

// Produce hands one batch to the actor.
func (h *Handle) Produce(m *messages.Produce) { h.Send(m) }

// configureParked applies a topic's new configuration to a parked actor
// in place (AlterConfigs on a topic of many idle partitions does not
// start them all); false if the actor is not parked.
func (h *Handle) configureParked(m *messages.UpdateConfig) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.parked == nil {
		return false
	}
	h.parked.updateConfig(m)
	return true
}

// actor returns the actor's PID, spawning it first if it is parked; nil
// if it cannot be spawned.
func (h *Handle) actor() *actor.PID {
	if pid := h.pid.Load(); pid != nil {
		return pid
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if pid := h.pid.Load(); pid != nil || h.parked == nil {
		return pid
	}
	pid, err := h.sys.Spawn("partition", actorName(h.Topic, h.Partition), h.parked, h.state)
	if err != nil {
		h.parked.logger().Error("starting the partition actor", "err", err)
		return nil
	}
	h.startPeriodic()
	h.parked = nil
	h.pid.Store(pid)
	return pid
}

// unpark takes a parked actor out of its Handle and the registry, for
// Stop and Retire to close it where they are instead of spawning it for
// that: nothing else can reach it afterwards, and requests that still
// come are refused as a retired actor refuses them. Nil if the actor was
// spawned (or is gone).
func (h *Handle) unpark() *Partition {
	h.mu.Lock()
	p := h.parked
	h.parked = nil
	h.mu.Unlock()
	if p != nil {
		h.sys.Unpark("partition", actorName(h.Topic, h.Partition))
	}
	return p
}

// Parked reports whether the actor has not been spawned yet.
func (h *Handle) Parked() bool { return h.pid.Load() == nil }

// state is the inspector's state function: it asks the actor (spawning a
// parked one: opening its page is a use).
func (h *Handle) state(*actor.PID) any {
	pid := h.actor()
	if pid == nil {
		return map[string]string{"status": "stopped"}
	}
	return h.sys.Inspect(pid)
}

// Periodic takes the actor's Tick and Checkpoint messages (system.EveryTo).
// A parked partition with no records and no producers has nothing to
// retain, expire or checkpoint, so it stays parked (only a write, which
// spawns it, can change that).
func (h *Handle) Periodic(msg any) {
	if h.pid.Load() == nil && h.empty() {
		return
	}
	h.Send(msg)
}

// Stop stops the actor, which fsyncs and closes the log; with remove the
// partition's directory is deleted afterwards. It returns why closing
// failed (the log was offline, or its last fsync failed): then not every
// write was made durable, and the shutdown must say so.
func (h *Handle) Stop(remove bool) error {
	if p := h.unpark(); p != nil {
		p.remove = remove
		p.close()
	} else if pid := h.pid.Load(); pid != nil {
		if remove {
			h.sys.Send(pid, removeOnStop{})
		}
		h.sys.Stop(pid)
	}
	if err := h.closeErr.Load(); err != nil {
		return fmt.Errorf("partition %s-%d: %w", h.Topic, h.Partition, *err)
	}
	return nil
}

type removeOnStop struct{}

// retire asks the actor to close its log (or, abandoning, only its files)
// and refuse everything after.
type retire struct {
	abandon bool
	done    chan struct{}
}

// RetireGrace is how long a retired actor keeps answering requests that
// were already on their way to it (with NOT_LEADER_OR_FOLLOWER) before it
// is stopped; a request later still is answered from the dead letters.
// Its name is given up at once (system.Detach), so the partition can be
// opened again meanwhile.
const RetireGrace = time.Second

// Retire closes the partition (fsync, snapshot, as Stop does) and returns
// once it is closed. From then on the actor answers every request with
// NOT_LEADER_OR_FOLLOWER, so a request that raced with the hand-off is
// told to re-route rather than dropped; it is stopped RetireGrace later.
// The caller unpublishes the handle first.
func (h *Handle) Retire() { h.retire(false) }

// Abandon is Retire for a partition this broker may no longer own (its
// lease is gone): the files are closed without a single write — no
// fsync, indexes, snapshot or clean-shutdown marker — and writes still
// waiting are answered NOT_LEADER_OR_FOLLOWER, never acknowledged.
func (h *Handle) Abandon() { h.retire(true) }

func (h *Handle) retire(abandon bool) {
	if p := h.unpark(); p != nil {
		if abandon {
			p.abandon()
		} else {
			p.close()
		}
		return
	}
	pid := h.pid.Load()
	if pid == nil {
		return // stopped or retired already
	}
	done := make(chan struct{})
	h.sys.Send(pid, &retire{abandon: abandon, done: done})
	_, _ = system.Await(context.Background(), done)
	// The name is free at once (the partition may be opened here again
	// while this actor still answers late requests); the actor goes
	// after the grace.
	h.sys.Detach(pid)
	time.AfterFunc(RetireGrace, func() { h.sys.Stop(pid) })
}

// Open recovers the partition's log and producer state and spawns its
// actor.
func Open(sys *system.System, cfg Config) (*Handle, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Env.Logger == nil {
		cfg.Env.Logger = cfg.Logger
	}
	cfg.Env = cfg.Env.Or()
	// The name first: an Open that cannot have it (the partition is open
	// here already) fails before it touches a file — a take-over seals
	// the segment and starts a new one.
	h := &Handle{Topic: cfg.Topic, Partition: cfg.Partition, sys: sys}
	name := actorName(cfg.Topic, cfg.Partition)
	if err := sys.Park("partition", name, h.state); err != nil {
		return nil, err
	}
	lg, err := openLog(cfg)
	if err != nil {
		sys.Unpark("partition", name)
		return nil, fmt.Errorf("partition %s-%d: %w", cfg.Topic, cfg.Partition, err)
	}
	h.published = lg.Published()
	p := &Partition{cfg: cfg, log: lg, producers: producers.New(cfg.Floors), sys: sys, handle: h}
	if err := p.recoverProducers(); err != nil {
		lg.CloseUnder(cfg.Gate)
		sys.Unpark("partition", name)
		return nil, fmt.Errorf("partition %s-%d: %w", cfg.Topic, cfg.Partition, err)
	}
	p.publish()
	h.parked = p
	if !h.empty() {
		h.startPeriodic()
	}
	// Last: the pool's checks may reach the Handle from now on.
	p.registerCleaner()
	return h, nil
}

// openLog recovers the partition's log, sealed against its previous
// owner when taking over, and led at cfg.LeaderEpoch.
func openLog(cfg Config) (*partlog.Log, error) {
	if err := partlog.ClaimDir(cfg.Env, cfg.Dir, cfg.TopicID, cfg.Gate); err != nil {
		return nil, err
	}
	lg, err := partlog.Open(cfg.Env, cfg.Dir, cfg.Log)
	if err != nil {
		return nil, err
	}
	if cfg.TakeOver {
		if err := lg.TakeOver(time.Now(), cfg.Gate); err != nil {
			// Not a clean close: the claim may be stale, and a peer may
			// own and write the directory (a close's marker and cut room
			// would land in its log).
			lg.Abandon()
			return nil, fmt.Errorf("taking over: %w", err)
		}
	}
	if err := lg.BecomeLeader(cfg.LeaderEpoch); err != nil {
		lg.CloseUnder(cfg.Gate)
		return nil, err
	}
	return lg, nil
}

// startPeriodic registers the actor's Tick and Checkpoint, once: at Open
// for a partition with records or producers, else when it is spawned (an
// empty partition gets neither until then: each registration is about
// 80 bytes a partition, and it has nothing to retain or checkpoint).
// Called under mu, or before the Handle is shared.
func (h *Handle) startPeriodic() {
	if h.periodic {
		return
	}
	h.periodic = true
	name, cfg := h.Name(), &h.parked.cfg
	h.sys.EveryTo(name, cfg.TickInterval, messages.Tick{}, h)
	h.sys.EveryTo(name, cfg.CheckpointInterval, messages.Checkpoint{}, h)
}

// empty reports whether the partition has no records and no producers.
func (h *Handle) empty() bool {
	v := h.View()
	return v.EndOffset == v.LogStart && h.stats.producerIDs.Load() == 0
}
