// Package partition is the partition actor: one per topic partition, the
// only writer of its log and its producer state. Appends, markers, fences
// and deletions are serialised through it; reads are not — fetch and
// ListOffsets use the log's published view through the Handle.
package partition

import (
	"fmt"
	"log/slog"
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
// verified at that generation. A marker written meanwhile moves the
// generation and the verified batch is refused (NOT_ENOUGH_REPLICAS, the
// producer retries and is verified again): a late batch of a transaction
// that was just completed can never open a new one here. Never sent to a
// client.
const VerifyRemotely int16 = -1000

// Config is what a partition actor needs.
type Config struct {
	Topic           string
	Partition       int32
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
type Handle struct {
	Topic     string
	Partition int32
	// pid is set once the actor is spawned (Open builds the handle first).
	pid       atomic.Pointer[actor.PID]
	sys       *system.System
	published *partlog.Published
	stats     *publishedStats
	watch     *watchers // long-poll fetches waiting for the next view
	// closeErr is why closing the log failed (set by the actor as it
	// stops, read after Stop returns).
	closeErr atomic.Pointer[error]
}

// Name is the actor's name, e.g. partition/orders-3.
func (h *Handle) Name() string { return "partition/" + actorName(h.Topic, h.Partition) }

func actorName(topic string, p int32) string { return fmt.Sprintf("%s-%d", topic, p) }

// View is the latest published read view.
func (h *Handle) View() *partlog.View { return h.published.View() }

// Send delivers a message to the partition actor.
func (h *Handle) Send(msg any) {
	if pid := h.pid.Load(); pid != nil {
		h.sys.Send(pid, msg)
	}
}

// Produce hands one batch to the actor.
func (h *Handle) Produce(m *messages.Produce) { h.sys.Send(h.pid.Load(), m) }

// Stop stops the actor, which fsyncs and closes the log; with remove the
// partition's directory is deleted afterwards. It returns why closing
// failed (the log was offline, or its last fsync failed): then not every
// write was made durable, and the shutdown must say so.
func (h *Handle) Stop(remove bool) error {
	if remove {
		h.sys.Send(h.pid.Load(), removeOnStop{})
	}
	h.sys.Stop(h.pid.Load())
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
	done := make(chan struct{})
	pid := h.pid.Load()
	h.sys.Send(pid, &retire{abandon: abandon, done: done})
	<-done
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
	lg, err := partlog.Open(cfg.Env, cfg.Dir, cfg.Log)
	if err != nil {
		return nil, fmt.Errorf("partition %s-%d: %w", cfg.Topic, cfg.Partition, err)
	}
	if cfg.TakeOver {
		if err := lg.TakeOver(time.Now()); err != nil {
			lg.Close()
			return nil, fmt.Errorf("partition %s-%d: taking over: %w", cfg.Topic, cfg.Partition, err)
		}
	}
	if err := lg.BecomeLeader(cfg.LeaderEpoch); err != nil {
		lg.Close()
		return nil, fmt.Errorf("partition %s-%d: %w", cfg.Topic, cfg.Partition, err)
	}
	stats, watch := &publishedStats{}, &watchers{}
	h := &Handle{Topic: cfg.Topic, Partition: cfg.Partition, sys: sys, published: lg.Published(), stats: stats, watch: watch}
	p := &Partition{cfg: cfg, log: lg, producers: producers.New(cfg.Floors), sys: sys, stats: stats, handle: h, watch: watch}
	if err := p.recoverProducers(); err != nil {
		lg.Close()
		return nil, fmt.Errorf("partition %s-%d: %w", cfg.Topic, cfg.Partition, err)
	}
	p.publish()
	pid, err := sys.Spawn("partition", actorName(cfg.Topic, cfg.Partition), p, sys.Inspect)
	if err != nil {
		lg.Close()
		return nil, err
	}
	h.pid.Store(pid)
	sys.Every(pid, cfg.TickInterval, messages.Tick{})
	sys.Every(pid, cfg.CheckpointInterval, messages.Checkpoint{})
	return h, nil
}
