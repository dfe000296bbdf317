// Package system wraps the protoactor-go actor system the way kaas uses it:
// every actor is spawned with a name that says what it owns
// (kind/name, e.g. partition/orders-3), with a mailbox that counts its
// depth and traffic, and with panics turned into logged errors instead of
// supervisor restarts that would throw the actor's state away.
package system

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
)

func init() {
	// protoactor's process registry is 1024 concurrent maps of
	// SHARD_COUNT shards each, made eagerly by every NewActorSystem:
	// with the library's default of 32 that is 32,768 maps, 3.5 MB before
	// the first actor (more than a thousand idle partitions take), and
	// every registration grows a map of its own. The 1024 buckets spread
	// the lock contention already; one shard per bucket keeps that and
	// drops the memory. Nothing else here uses concurrent-map, and no map
	// exists before this runs (protoactor makes them in NewActorSystem).
	cmap.SHARD_COUNT = 1
}

// System is the broker's actor system plus a registry of live actors.
type System struct {
	actors *actor.ActorSystem
	Root   *actor.RootContext
	log    *slog.Logger

	mu       sync.RWMutex
	registry map[string]*Info // by name (kind/name): live or parked
	// procs are the spawned actors not yet stopped, by protoactor id
	// (Info.PID.Id): the registry's running actors, and detached ones
	// (Detach) that live on under a name a successor may now hold.
	procs   map[string]*Info
	retired map[string]int64 // messages processed by stopped actors, by kind
	spawns  uint64           // ids handed out (a successor's unique id)

	dispatcher *pooledDispatcher
	clock      *clock
	// props are the Props of every actor spawned. Props hold the actor's
	// producers, so they used to be made per actor (about 300 bytes
	// each, kept for its life); one set now serves all: Spawn hands the
	// actor and its mailbox counters over through spawning, under
	// spawnMu (protoactor calls both producers inside SpawnNamed, and
	// never again: the supervisor only resumes).
	props    *actor.Props
	spawnMu  sync.Mutex
	spawning struct {
		actor *recovering
		stats *MailboxStats
	}
	wheels   map[time.Duration]*wheel // Every's timers, one per period
	shutdown bool
}

// Info describes one live actor for metrics and the inspector.
type Info struct {
	Kind    string
	Name    string // unique: kind/name
	PID     *actor.PID
	Mailbox *MailboxStats
	Started time.Time
	// State, when set, returns a summary of the actor for the inspector:
	// either state the actor published, or an answer it gave to a
	// request with a short timeout (never its live state).
	State func(pid *actor.PID) any

	every []*periodic // Every registrations, cancelled when it stops
}

// New starts an actor system that logs through logger.
func New(logger *slog.Logger) *System {
	as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger.With("lib", "protoactor")
	}))
	s := &System{actors: as, Root: as.Root, log: logger, registry: make(map[string]*Info), procs: make(map[string]*Info), retired: make(map[string]int64),
		dispatcher: newPooledDispatcher(300), // 300: protoactor's default throughput
		clock:      startClock(), wheels: make(map[time.Duration]*wheel)}
	s.props = actor.PropsFromProducer(func() actor.Actor { return s.spawning.actor },
		actor.WithMailbox(func() actor.Mailbox { return s.spawning.stats.newMailbox() }),
		actor.WithDispatcher(s.dispatcher),
		// A panic is already recovered inside the receiver; never restart,
		// since restarting would discard the actor's state.
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.ResumeDirective })),
	)
	as.EventStream.Subscribe(s.deadLetter)
	return s
}

// Undeliverable is a request that can be answered when its actor is gone
// (a partition handed off to a peer broker: NOT_LEADER_OR_FOLLOWER), so a
// request that raced with the actor's stop is answered instead of
// dropped, which would stall its connection's in-order replies.
type Undeliverable interface{ NotLeader() }

func (s *System) deadLetter(evt any) {
	if dl, ok := evt.(*actor.DeadLetterEvent); ok {
		if u, ok := dl.Message.(Undeliverable); ok {
			u.NotLeader()
		}
	}
}

// Park registers kind/name as an actor that is not running yet: it is
// listed (Actors, Lookup) with a nil PID and no mailbox traffic, and
// EveryTo registrations can be made for it, but it costs no protoactor
// process, mailbox or context until Spawn starts it under the same name
// (taking those registrations over). That is what an idle partition is:
// most of a broker's partitions may never get a message. It fails if an
// actor of that name is live (or parked).
func (s *System) Park(kind, name string, state func(*actor.PID) any) error {
	full := kind + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return fmt.Errorf("parking %s: the actor system is shut down", full)
	}
	if _, ok := s.registry[full]; ok {
		return fmt.Errorf("parking %s: %w", full, actor.ErrNameExists)
	}
	s.registry[full] = &Info{Kind: kind, Name: full, Mailbox: parkedMailbox, Started: time.Now(), State: state}
	return nil
}

// parkedMailbox is the mailbox every parked actor shows: empty, never
// used (shared, as it is never written).
var parkedMailbox = &MailboxStats{}

// Spawn starts a as kind/name. state, if not nil, reads what the actor
// publishes for the inspector. A parked kind/name (Park) is started,
// keeping its EveryTo registrations. The protoactor id is the name,
// unless a detached predecessor (Detach) still runs under it: then the
// name with a unique suffix.
func (s *System) Spawn(kind, name string, a actor.Actor, state func(*actor.PID) any) (*actor.PID, error) {
	full := kind + "/" + name
	s.mu.Lock()
	if cur, ok := s.registry[full]; ok && cur.PID != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("spawning %s: %w", full, actor.ErrNameExists)
	}
	id := full
	if _, detached := s.procs[id]; detached {
		s.spawns++
		id = full + "#" + strconv.FormatUint(s.spawns, 10)
	}
	s.mu.Unlock()
	stats := &MailboxStats{clock: s.clock}
	r := &recovering{Actor: a, sys: s, name: full, stats: stats}
	s.spawnMu.Lock()
	s.spawning.actor, s.spawning.stats = r, stats
	pid, err := s.Root.SpawnNamed(s.props, id)
	s.spawning.actor, s.spawning.stats = nil, nil
	s.spawnMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("spawning %s: %w", full, err)
	}
	info := &Info{Kind: kind, Name: full, PID: pid, Mailbox: stats, Started: time.Now(), State: state}
	s.mu.Lock()
	if parked, ok := s.registry[full]; ok && parked.PID == nil {
		info.Started, info.every = parked.Started, parked.every
	}
	s.registry[full] = info
	s.procs[pid.Id] = info
	s.mu.Unlock()
	return pid, nil
}

// Detach gives up pid's name while the actor keeps running until Stop:
// it leaves the registry (and its Every and EveryTo registrations end),
// so a successor can be parked or spawned under the name at once. A
// partition handed off keeps answering the requests already on their way
// to it for a grace period; the next ownership of the partition on this
// broker must not wait for that.
func (s *System) Detach(pid *actor.PID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.procs[pid.Id]
	if ok && s.registry[i.Name] == i {
		s.retired[i.Kind] += i.Mailbox.Processed()
		delete(s.registry, i.Name)
		stopEvery(i)
	}
}

// Unpark removes kind/name if it is still parked (never spawned), with
// its EveryTo registrations; a spawned actor is left alone (Stop it).
func (s *System) Unpark(kind, name string) {
	full := kind + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.registry[full]; ok && i.PID == nil {
		delete(s.registry, full)
		stopEvery(i)
	}
}

// Stop stops an actor after the messages already in its mailbox and waits
// for it. Stopping an actor twice returns at once (a poison future for a
// stopped actor would only time out).
func (s *System) Stop(pid *actor.PID) {
	s.mu.Lock()
	i, live := s.procs[pid.Id]
	if live {
		delete(s.procs, pid.Id)
		if s.registry[i.Name] == i { // else detached: counted and cancelled then
			s.retired[i.Kind] += i.Mailbox.Processed()
			delete(s.registry, i.Name)
			stopEvery(i)
		}
	}
	s.mu.Unlock()
	if live {
		_ = s.Root.PoisonFuture(pid).Wait()
	}
}

// Send delivers msg to pid without waiting (about a channel send).
func (s *System) Send(pid *actor.PID, msg any) { s.Root.Send(pid, msg) }

// Actors lists the live actors sorted by name.
func (s *System) Actors() []*Info {
	s.mu.RLock()
	out := make([]*Info, 0, len(s.registry))
	for _, i := range s.registry {
		out = append(out, i)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the actor named name (kind/name).
func (s *System) Lookup(name string) (*Info, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.registry[name]
	return i, ok
}

// LookupPID returns the live actor at pid.
func (s *System) LookupPID(pid *actor.PID) (*Info, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.procs[pid.Id]
	return i, ok
}

// Shutdown stops the actor system (and every Every); once.
func (s *System) Shutdown() {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return
	}
	s.shutdown = true
	for _, i := range s.registry {
		stopEvery(i)
	}
	for _, w := range s.wheels {
		w.close()
	}
	s.mu.Unlock()
	s.actors.Shutdown()
	s.dispatcher.close()
	s.clock.close()
}

// Panicked is what an actor's Receive sees in place of a message whose
// handling panicked; actors that hold reply callbacks use it to answer.
type Panicked struct {
	Message any
	Reason  any
}

// recovering wraps every spawned actor: a panic while handling a message
// is logged and, when the message can fail (it carries a reply), answered
// with the failure, instead of reaching protoactor's supervisor. It is a
// wrapper rather than protoactor receiver middleware because middleware
// wraps every message in a freshly allocated envelope and runs a chain of
// closures, a measurable share of an actor round trip.
type recovering struct {
	actor.Actor
	sys   *System
	name  string
	stats *MailboxStats
}

func (r *recovering) Receive(c actor.Context) {
	defer func() {
		if p := recover(); p != nil {
			msg := c.Message()
			r.sys.log.Error("actor panicked handling a message", "actor", r.name,
				"message", fmt.Sprintf("%T", msg), "panic", p, "stack", string(debug.Stack()))
			if f, ok := msg.(interface{ Fail(reason any) }); ok {
				f.Fail(p)
			}
		}
		r.stats.took()
	}()
	r.Actor.Receive(c)
}
