package consumergroup

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
	"kaas/storage/offsetlog"
)

// ConsumerProtocolType is the protocol type of Kafka consumers; only their
// metadata is parsed (for the subscribed topics).
const ConsumerProtocolType = "consumer"

// Offset is a committed or staged offset.
type Offset = offsetlog.Offset

// Group is one consumer group (Apache's GroupMetadata plus the
// coordinator logic that drives it).
type Group struct {
	id  string
	cfg Config
	env Env
	log *slog.Logger

	state        State
	stateTimeMs  int64 // when the state last changed; -1: unknown (old metadata)
	protocolType string
	protocolName *string
	generation   int32
	leader       string

	members map[string]*Member
	order   []string          // member ids in the order they joined
	static  map[string]string // group.instance.id → member id
	// pending members got MEMBER_ID_REQUIRED and have not rejoined yet.
	pending     map[string]func()
	numAwaiting int
	supported   map[string]int // protocol → members supporting it
	pendingSync map[string]bool
	// newMemberAdded extends the initial rebalance delay.
	newMemberAdded bool
	// subscribed is the union of consumer members' topics; nil when
	// unknown (not a consumer group, or unparseable metadata).
	subscribed map[string]bool

	offsets        map[model.TopicPartition]Offset
	pendingCommits map[model.TopicPartition]Offset           // plain commits being written
	pendingTxn     map[int64]map[model.TopicPartition]Offset // staged by producer id; Seq 0 until written
	gotPlain       bool
	gotTxn         bool

	nextToken uint64
	join      *joinOp
	sync      *syncOp

	// cg is the KIP-848 state; nil for a classic group.
	cg *consumerGroup
	// writes tracks the log appends in flight, so an answer that wrote
	// nothing can still wait for the ones it depends on (writes.go).
	writes writeTracker
	// removals numbers the cleanups and unloads, so a failed delete
	// knows whether a later one has since changed what it removed
	// (undo.go).
	removals uint64
}

// joinOp is the pending completion of PreparingRebalance (Apache's
// DelayedJoin, or InitialDelayedJoin for a group formed from Empty).
type joinOp struct {
	token       uint64
	initial     bool
	configured  int64 // ms, initial only
	delay       int64 // ms
	remaining   int64 // ms, initial only
	cancelTimer func()
}

// syncOp expires members that got a generation but never sent SyncGroup
// (Apache's DelayedSync).
type syncOp struct {
	token       uint64
	generation  int32
	cancelTimer func()
}

// New is a new, Empty group.
func New(id string, cfg Config, env Env, log *slog.Logger) *Group {
	g := &Group{
		id: id, cfg: cfg.Normalized(), env: env, log: log,
		members: map[string]*Member{}, static: map[string]string{}, pending: map[string]func(){},
		supported: map[string]int{}, pendingSync: map[string]bool{},
		offsets: map[model.TopicPartition]Offset{}, pendingCommits: map[model.TopicPartition]Offset{}, pendingTxn: map[int64]map[model.TopicPartition]Offset{},
	}
	g.stateTimeMs = g.nowMs()
	return g
}

// Load rebuilds a group from its slot log (Apache's loadGroup and
// onGroupLoaded): Stable with its members if it had any, else Empty, with
// every member's session timer running. gs must not be shared.
func Load(id string, cfg Config, env Env, log *slog.Logger, gs *offsetlog.GroupState) *Group {
	g := New(id, cfg, env, log)
	g.offsets = gs.Offsets
	g.pendingTxn = gs.Pending
	if gs.Consumer != nil {
		g.loadConsumer(gs.Consumer)
		return g
	}
	if md := gs.Metadata; md != nil {
		g.generation = md.Generation
		g.protocolType = md.ProtocolType
		g.protocolName = md.Protocol
		if md.Leader != nil {
			g.leader = *md.Leader
		}
		g.stateTimeMs = md.CurrentStateTimestamp
		for _, mm := range md.Members {
			m := &Member{
				ID: mm.MemberID, InstanceID: mm.InstanceID, ClientID: mm.ClientID, ClientHost: mm.ClientHost,
				RebalanceTimeoutMs: mm.RebalanceTimeoutMillis, SessionTimeoutMs: mm.SessionTimeoutMillis,
				ProtocolType: md.ProtocolType, Assignment: mm.Assignment,
			}
			if md.Protocol != nil {
				m.Protocols = []Protocol{{Name: *md.Protocol, Metadata: mm.Subscription}}
			}
			g.add(m, nil)
		}
		if len(g.members) > 0 {
			g.state = Stable
		}
		g.subscribed = g.computeSubscribed()
	}
	if len(g.members) > g.cfg.MaxSize {
		g.prepareRebalance(fmt.Sprintf("freshly-loaded group is over capacity (%d)", g.cfg.MaxSize))
	}
	for _, id := range g.order {
		g.scheduleHeartbeat(g.members[id])
	}
	return g
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// State is the group's state.
func (g *Group) State() State { return g.state }

// Generation is the current generation id.
func (g *Group) Generation() int32 { return g.generation }

// ProtocolType is the group's protocol type ("" before any member).
func (g *Group) ProtocolType() string { return g.protocolType }

func (g *Group) nowMs() int64 { return g.env.Now().UnixMilli() }

func (g *Group) transition(to State) {
	if !CanTransition(g.state, to) {
		// Apache throws IllegalStateException here; a broken invariant
		// must not go unnoticed, but must not take the broker down.
		g.log.Error("illegal group state transition", "from", g.state, "to", to)
	}
	g.state = to
	g.stateTimeMs = g.nowMs()
}

func (g *Group) isLeader(id string) bool { return g.leader != "" && g.leader == id }

// newMemberID is Apache's generateMemberId: client id (or instance id)
// and a random UUID.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (g *Group) add(m *Member, cb func(JoinResult)) {
	if m.InstanceID != nil {
		g.static[*m.InstanceID] = m.ID
	}
	if len(g.members) == 0 {
		g.protocolType = m.ProtocolType
	}
	if g.leader == "" {
		g.leader = m.ID
	}
	g.members[m.ID] = m
	g.order = append(g.order, m.ID)
	g.incSupported(m)
	m.awaitingJoin = cb
	if cb != nil {
		g.numAwaiting++
	}
	g.dropPending(m.ID)
}

func (g *Group) remove(id string) {
	if m := g.members[id]; m != nil {
		g.decSupported(m)
		if m.isAwaitingJoin() {
			g.numAwaiting--
		}
		if m.InstanceID != nil {
			delete(g.static, *m.InstanceID)
		}
		if m.hbCancel != nil {
			m.hbCancel()
			m.hbCancel = nil
		}
		delete(g.members, id)
		g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	}
	if g.isLeader(id) {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	g.dropPending(id)
	delete(g.pendingSync, id)
}

func (g *Group) dropPending(id string) {
	if cancel, ok := g.pending[id]; ok {
		cancel()
		delete(g.pending, id)
	}
}

func (g *Group) incSupported(m *Member) {
	for _, p := range m.Protocols {
		g.supported[p.Name]++
	}
}

func (g *Group) decSupported(m *Member) {
	for _, p := range m.Protocols {
		if g.supported[p.Name]--; g.supported[p.Name] <= 0 {
			delete(g.supported, p.Name)
		}
	}
}

// updateMember replaces a member's protocols and timeouts and parks (or,
// with a nil cb, unparks) its JoinGroup.
func (g *Group) updateMember(m *Member, protocols []Protocol, rebalanceMs, sessionMs int32, cb func(JoinResult)) {
	g.decSupported(m)
	m.Protocols = protocols
	g.incSupported(m)
	m.RebalanceTimeoutMs, m.SessionTimeoutMs = rebalanceMs, sessionMs
	if cb != nil && !m.isAwaitingJoin() {
		g.numAwaiting++
	} else if cb == nil && m.isAwaitingJoin() {
		g.numAwaiting--
	}
	m.awaitingJoin = cb
}

// replaceStaticMember gives a known static member a new member id,
// fencing whoever still waits under the old one.
func (g *Group) replaceStaticMember(instanceID, oldID, newID string) *Member {
	m := g.members[oldID]
	delete(g.members, oldID)
	g.maybeInvokeJoin(m, JoinResult{MemberID: oldID, Generation: -1, Err: errFencedInstanceID})
	g.maybeInvokeSync(m, SyncResult{Err: errFencedInstanceID})
	if m.hbCancel != nil {
		m.hbCancel()
		m.hbCancel = nil
	}
	m.ID = newID
	g.members[newID] = m
	if i := slices.Index(g.order, oldID); i >= 0 {
		g.order[i] = newID
	}
	if g.isLeader(oldID) {
		g.leader = newID
	}
	g.static[instanceID] = newID
	return m
}

func (g *Group) maybeInvokeJoin(m *Member, r JoinResult) {
	if cb := m.awaitingJoin; cb != nil {
		m.awaitingJoin = nil
		g.numAwaiting--
		cb(r)
	}
}

func (g *Group) maybeInvokeSync(m *Member, r SyncResult) bool {
	cb := m.awaitingSync
	if cb == nil {
		return false
	}
	m.awaitingSync = nil
	cb(r)
	return true
}

func (g *Group) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaiting && len(g.pending) == 0
}

func (g *Group) rebalanceTimeoutMs() int64 {
	var t int32
	for _, m := range g.members {
		t = max(t, m.RebalanceTimeoutMs)
	}
	return int64(t)
}

// supportsProtocols is Apache's check that a joining member can be in the
// group: any non-empty protocol set while Empty, otherwise the same
// protocol type and one protocol every member supports.
func (g *Group) supportsProtocols(protocolType string, protocols []Protocol) bool {
	if g.state == Empty {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

// selectProtocol picks the protocol all members support that gets the
// most first-preference votes (ties go to the earliest member's vote).
func (g *Group) selectProtocol() string {
	candidates := map[string]bool{}
	for p, n := range g.supported {
		if n == len(g.members) {
			candidates[p] = true
		}
	}
	votes := map[string]int{}
	best, bestVotes := "", -1
	for _, id := range g.order {
		v := g.members[id].vote(candidates)
		votes[v]++
	}
	for _, id := range g.order {
		v := g.members[id].vote(candidates)
		if votes[v] > bestVotes {
			best, bestVotes = v, votes[v]
		}
	}
	return best
}

// computeSubscribed is Apache's computeSubscribedTopics: the topics of
// every consumer member's subscription, or nil when not knowable.
func (g *Group) computeSubscribed() map[string]bool {
	if g.protocolType != ConsumerProtocolType {
		return nil
	}
	if len(g.members) == 0 {
		return map[string]bool{}
	}
	if g.protocolName == nil {
		return nil
	}
	out := map[string]bool{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadata(*g.protocolName)); err != nil {
			g.log.Warn("cannot parse consumer protocol metadata; subscribed topics unknown", "member", m.ID, "err", err)
			return nil
		}
		for _, t := range md.Topics {
			out[t] = true
		}
	}
	return out
}

func (g *Group) isSubscribedTo(topic string) bool {
	if g.cg != nil {
		return g.cg.isSubscribedTo(topic)
	}
	return g.subscribed == nil || g.subscribed[topic]
}

// isEmpty is Apache's Group.isEmpty: a classic group in state Empty, a
// consumer group without members.
func (g *Group) isEmpty() bool {
	if g.cg != nil {
		return g.cg.isEmpty()
	}
	return g.state == Empty
}

// currentMemberMetadata is what the leader gets in its JoinGroup answer.
func (g *Group) currentMemberMetadata() []JoinMember {
	out := make([]JoinMember, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		var md []byte
		if g.protocolName != nil {
			md = m.metadata(*g.protocolName)
		}
		out = append(out, JoinMember{MemberID: id, InstanceID: m.InstanceID, Metadata: md})
	}
	return out
}

// metadataValue is the group as stored in its slot log (Apache's
// groupMetadataValue, v3), with the given assignment.
func (g *Group) metadataValue(assignment map[string][]byte) *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = g.protocolName
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTimeMs
	for _, id := range g.order {
		m := g.members[id]
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID, mv.InstanceID, mv.ClientID, mv.ClientHost = id, m.InstanceID, m.ClientID, m.ClientHost
		mv.RebalanceTimeoutMillis, mv.SessionTimeoutMillis = m.RebalanceTimeoutMs, m.SessionTimeoutMs
		if g.protocolName != nil {
			mv.Subscription = m.metadata(*g.protocolName)
		}
		mv.Assignment = assignment[id]
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return &v
}

// storeGroup persists the group's metadata with assignment (Apache's
// storeGroup); done runs once it is durable or failed.
func (g *Group) storeGroup(assignment map[string][]byte, done func(code int16)) {
	e := offsetlog.Entry{Kind: offsetlog.KindPlain, Records: []offsetlog.Record{offsetlog.GroupRecord(g.id, g.metadataValue(assignment))}}
	g.persist(e, func(code int16, _ uint64) { done(mapStoreError(code)) })
}

func (g *Group) assignments() map[string][]byte {
	out := make(map[string][]byte, len(g.members))
	for id, m := range g.members {
		out[id] = m.Assignment
	}
	return out
}
