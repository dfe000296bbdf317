// Package sharegroup is the share groups of one broker (KIP-932): their
// members, epochs and assignments (ShareGroupHeartbeat, Apache's
// GroupMetadataManager share paths with the simple assignor), the share
// sessions members fetch in (Apache's ShareSessionCache), and each
// group's share-partitions (state/sharepartition).
//
// A share group has no revocation: a partition may be assigned to many
// members at once, so a new assignment is handed over at the member's
// next heartbeat, its epoch moving to the group's. The group epoch rises
// whenever the membership, a subscription or a subscribed topic's
// partition count changes.
//
// Pure: no actor, no I/O, the clock is an argument.
package sharegroup

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/state/sharepartition"
)

// TopicID is a topic's id.
type TopicID = [16]byte

// Topics is the broker's topics, for subscriptions.
type Topics interface {
	// ByName returns a topic's id and partition count.
	ByName(name string) (id TopicID, partitions int32, ok bool)
}

// Config is the broker's group.share.* configuration.
type Config struct {
	HeartbeatInterval time.Duration // group.share.heartbeat.interval.ms (5 s)
	SessionTimeout    time.Duration // group.share.session.timeout.ms (45 s)
	MaxSize           int           // group.share.max.size (200)
	MaxSessions       int           // group.share.max.share.sessions (2000)
	// AutoOffsetReset is share.auto.offset.reset: where a share-partition
	// starts, "latest" (Apache's default), "earliest" or "by_duration"
	// (the first record at most ResetBy before now).
	AutoOffsetReset string
	ResetBy         time.Duration
	// ReadCommitted is share.isolation.level=read_committed.
	ReadCommitted bool
	Partition     sharepartition.Config
}

// Defaults is Apache 4.2's configuration.
func Defaults() Config {
	return Config{HeartbeatInterval: 5 * time.Second, SessionTimeout: 45 * time.Second, MaxSize: 200, MaxSessions: 2000,
		AutoOffsetReset: "latest", Partition: sharepartition.Defaults()}
}

// Member is one member of a share group.
type Member struct {
	ID, ClientID, ClientHost string
	Rack                     *string
	Epoch, PrevEpoch         int32
	Subscribed               []string // sorted
	Assignment               map[TopicID][]int32
	deadline                 time.Time
}

// Group is one share group.
type Group struct {
	ID         string
	Epoch      int32
	Members    map[string]*Member
	Partitions map[model.TopicIDPartition]*sharepartition.Partition
	target     map[string]map[TopicID][]int32
	sessions   map[string]*Session // by member id
}

// Session is a member's share session on this broker: the partitions it
// fetches and the epoch its next request must carry.
type Session struct {
	Epoch      int32
	Partitions map[model.TopicIDPartition]struct{}
	owner      any // the connection that opened it
	// HeldUp counts the fetches answered early since the member's last
	// acknowledgement because it held up a full window (the share
	// coordinator's heldUpWait doubles with each).
	HeldUp int
}

// Coordinator is every share group on this broker.
type Coordinator struct {
	cfg      Config
	perGroup map[string]Config // groups with their own configs (GROUP config resources)
	topics   Topics
	groups   map[string]*Group
	sessions int
}

// New starts with no share groups.
func New(cfg Config, topics Topics) *Coordinator {
	return &Coordinator{cfg: cfg, topics: topics, groups: map[string]*Group{}}
}

// Config is the broker's configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// ConfigFor is the configuration group id runs with: its own if it has
// group configs, else the broker's.
func (c *Coordinator) ConfigFor(id string) Config {
	if cfg, ok := c.perGroup[id]; ok {
		return cfg
	}
	return c.cfg
}

// SetGroupConfigs replaces every group's own configuration (the groups
// not named run with the broker's). As in Apache, a change applies from
// now on: a heartbeat's interval and session deadline, and each
// share-partition's lock duration, delivery limit and in-flight bound
// for the acquisitions to come (records already acquired keep their
// deadline). A share-partition's start is not moved by a new
// share.auto.offset.reset: it only says where a new one starts.
func (c *Coordinator) SetGroupConfigs(perGroup map[string]Config) {
	c.perGroup = perGroup
	for id, g := range c.groups {
		cfg := c.ConfigFor(id)
		for _, p := range g.Partitions {
			p.SetConfig(cfg.Partition)
		}
	}
}

// Group returns a share group, or nil.
func (c *Coordinator) Group(id string) *Group { return c.groups[id] }

// Groups lists the share groups' ids, sorted.
func (c *Coordinator) Groups() []string { return slices.Sorted(maps.Keys(c.groups)) }

// State is Apache's ShareGroupState name: Empty, or Stable (a share group
// never waits for revocations, so it has no assigning/reconciling state).
func (g *Group) State() string {
	if len(g.Members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func (c *Coordinator) group(id string) *Group {
	g := c.groups[id]
	if g == nil {
		g = &Group{ID: id, Members: map[string]*Member{}, Partitions: map[model.TopicIDPartition]*sharepartition.Partition{}, sessions: map[string]*Session{}}
		c.groups[id] = g
	}
	return g
}

// HeartbeatRequest is a ShareGroupHeartbeat.
type HeartbeatRequest struct {
	Group, MemberID string
	Epoch           int32
	Rack            *string
	// Subscribed is nil when unchanged since the last heartbeat.
	Subscribed           []string
	ClientID, ClientHost string
}

// HeartbeatResult is its answer.
type HeartbeatResult struct {
	Code          int16
	Message       string
	MemberID      string
	Epoch         int32
	Interval      time.Duration
	HasAssignment bool
	Assignment    map[TopicID][]int32
}

// Validate is Apache's throwIfShareGroupHeartbeatRequestIsInvalid.
func Validate(r HeartbeatRequest) (int16, string) {
	switch {
	case strings.TrimSpace(r.Group) == "":
		return kerr.InvalidRequest.Code, "GroupId can't be empty."
	case r.MemberID == "" || len(r.MemberID) > 36:
		return kerr.InvalidRequest.Code, "MemberId can't be empty."
	case r.Epoch < -1:
		return kerr.InvalidRequest.Code, "MemberEpoch is invalid."
	case r.Rack != nil && strings.TrimSpace(*r.Rack) == "":
		return kerr.InvalidRequest.Code, "RackId can't be empty."
	case r.Epoch == 0 && len(r.Subscribed) == 0:
		return kerr.InvalidRequest.Code, "SubscribedTopicNames must be set in first request."
	}
	return 0, ""
}

// Heartbeat is ShareGroupHeartbeat once Validate passed: join (epoch 0),
// leave (-1) or heartbeat. A heartbeat names the member's current epoch
// or the one before (its answer may have been lost), else
// FENCED_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID; a group
// that does not exist, GROUP_ID_NOT_FOUND.
func (c *Coordinator) Heartbeat(r HeartbeatRequest, now time.Time) HeartbeatResult {
	cfg := c.ConfigFor(r.Group)
	res := HeartbeatResult{MemberID: r.MemberID, Interval: cfg.HeartbeatInterval}
	g := c.groups[r.Group]
	if g == nil && r.Epoch != 0 {
		res.Code, res.Message = kerr.GroupIDNotFound.Code, "Group "+r.Group+" not found."
		return res
	}
	if r.Epoch == -1 {
		if g.Members[r.MemberID] == nil {
			res.Code = kerr.UnknownMemberID.Code
			return res
		}
		c.remove(g, r.MemberID, now)
		res.Epoch = -1
		return res
	}
	if g == nil {
		g = c.group(r.Group)
	}
	m := g.Members[r.MemberID]
	switch {
	case r.Epoch == 0 && m == nil:
		if c.cfg.MaxSize > 0 && len(g.Members) >= c.cfg.MaxSize {
			res.Code, res.Message = kerr.GroupMaxSizeReached.Code, "The share group has reached its maximum capacity."
			return res
		}
		m = &Member{ID: r.MemberID}
		g.Members[r.MemberID] = m
	case m == nil:
		res.Code, res.Message = kerr.UnknownMemberID.Code, "Member "+r.MemberID+" is not a member of group "+r.Group+"."
		return res
	case r.Epoch != 0 && r.Epoch != m.Epoch && r.Epoch != m.PrevEpoch:
		res.Code = kerr.FencedMemberEpoch.Code
		return res
	}
	m.ClientID, m.ClientHost, m.deadline = r.ClientID, r.ClientHost, now.Add(cfg.SessionTimeout)
	if r.Rack != nil {
		m.Rack = r.Rack
	}
	if r.Subscribed != nil {
		m.Subscribed = slices.Compact(slices.Sorted(slices.Values(r.Subscribed)))
	}
	c.reassign(g)
	before := m.Epoch
	if m.Epoch != g.Epoch {
		m.PrevEpoch, m.Epoch = m.Epoch, g.Epoch
		m.Assignment = g.target[m.ID]
	}
	res.Epoch = m.Epoch
	// As Apache: the assignment goes with a full request (one naming its
	// subscription) or with the heartbeat that changed it.
	if r.Subscribed != nil || m.Epoch != before {
		res.HasAssignment, res.Assignment = true, m.Assignment
	}
	return res
}

// reassign computes every member's target assignment and bumps the
// group epoch if it changed.
func (c *Coordinator) reassign(g *Group) {
	t := simpleAssign(g.Members, c.topics)
	if g.target != nil && equalTargets(g.target, t) {
		return
	}
	g.target = t
	g.Epoch++
}

// remove takes a member out of its group: its sessions close and every
// record it holds is released.
func (c *Coordinator) remove(g *Group, member string, now time.Time) {
	delete(g.Members, member)
	if g.sessions[member] != nil {
		delete(g.sessions, member)
		c.sessions--
	}
	for _, p := range g.Partitions {
		p.ReleaseMember(member, now)
	}
	if len(g.Members) > 0 || g.target != nil {
		c.reassign(g)
	}
}

// Expire fences the members whose session timed out and expires the
// record locks due by now. It reports whether any record became
// available.
func (c *Coordinator) Expire(now time.Time) bool {
	released := false
	for _, g := range c.groups {
		for id, m := range g.Members {
			if !now.Before(m.deadline) {
				c.remove(g, id, now)
				released = true
			}
		}
		for _, p := range g.Partitions {
			if p.Expire(now) > 0 {
				released = true
			}
		}
	}
	return released
}

// NextDeadline is the earliest member session or record lock deadline.
func (c *Coordinator) NextDeadline() (time.Time, bool) {
	var d time.Time
	take := func(t time.Time) {
		if d.IsZero() || t.Before(d) {
			d = t
		}
	}
	for _, g := range c.groups {
		for _, m := range g.Members {
			take(m.deadline)
		}
		for _, p := range g.Partitions {
			if t, ok := p.NextDeadline(); ok {
				take(t)
			}
		}
	}
	return d, !d.IsZero()
}

// Partition returns the group's share-partition for tp, starting it at
// start() (from share.auto.offset.reset) the first time.
func (g *Group) Partition(cfg sharepartition.Config, tp model.TopicIDPartition, start func() int64) *sharepartition.Partition {
	p := g.Partitions[tp]
	if p == nil {
		p = sharepartition.New(start(), cfg)
		g.Partitions[tp] = p
	}
	return p
}

// Session returns a member's share session, or nil.
func (g *Group) Session(member string) *Session { return g.sessions[member] }

// Restore puts back a share-partition recovered from disk: its group is
// created with no members (they rejoin).
func (c *Coordinator) Restore(group string, tp model.TopicIDPartition, p *sharepartition.Partition) {
	c.group(group).Partitions[tp] = p
}

// AlterStart is AlterShareGroupOffsets for one share-partition: the
// window starts again at offset, every record state and delivery count
// forgotten. Apache allows it only for a group without members
// (NON_EMPTY_GROUP); a group that does not exist is created.
func (c *Coordinator) AlterStart(group string, tp model.TopicIDPartition, offset int64) (*sharepartition.Partition, int16) {
	g := c.group(group)
	if len(g.Members) > 0 {
		return nil, kerr.NonEmptyGroup.Code
	}
	p := g.Partitions[tp]
	if p == nil {
		p = sharepartition.New(offset, c.ConfigFor(group).Partition)
		g.Partitions[tp] = p
	}
	p.Reset(offset)
	return p, 0
}

// DeleteGroup is DeleteGroups for a share group: allowed only when it has
// no members (NON_EMPTY_GROUP, Apache's ShareGroup.validateDeleteGroup);
// the group goes with every share-partition, which it returns so that
// their state can be deleted too. An unknown group is GROUP_ID_NOT_FOUND.
func (c *Coordinator) DeleteGroup(id string) ([]model.TopicIDPartition, int16) {
	g := c.groups[id]
	if g == nil {
		return nil, kerr.GroupIDNotFound.Code
	}
	if len(g.Members) > 0 {
		return nil, kerr.NonEmptyGroup.Code
	}
	tps := slices.SortedFunc(maps.Keys(g.Partitions), func(a, b model.TopicIDPartition) int {
		if c := strings.Compare(string(a.Topic[:]), string(b.Topic[:])); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	c.sessions -= len(g.sessions)
	delete(c.groups, id)
	return tps, 0
}

// DeletePartitions is DeleteShareGroupOffsets for one topic: its
// share-partitions are forgotten (the next fetch starts one from
// share.auto.offset.reset). The group must exist (GROUP_ID_NOT_FOUND) and
// have no members (NON_EMPTY_GROUP). It returns what it deleted.
func (c *Coordinator) DeletePartitions(group string, topic TopicID) ([]model.TopicIDPartition, int16) {
	g := c.groups[group]
	if g == nil {
		return nil, kerr.GroupIDNotFound.Code
	}
	if len(g.Members) > 0 {
		return nil, kerr.NonEmptyGroup.Code
	}
	var out []model.TopicIDPartition
	for tp := range g.Partitions {
		if tp.Topic == topic {
			delete(g.Partitions, tp)
			out = append(out, tp)
		}
	}
	return out, 0
}

// DropPartition forgets every group's share-partition of tp: the
// partition's owner changed (cluster), and its state is the new owner's,
// who loads it from the shared volume. Records acquired here are not
// released: the new owner loads them Available. Groups left with nothing
// here are removed.
func (c *Coordinator) DropPartition(tp model.TopicIDPartition) {
	for id, g := range c.groups {
		delete(g.Partitions, tp)
		c.dropIfUnused(id, g)
	}
}

// UnloadMembers forgets the membership of the groups in (their offsets
// slot moved to another broker, which becomes their coordinator; members
// rejoin there on UNKNOWN_MEMBER_ID, as after a restart). As Apache's
// coordinator, it leaves the share-partitions and share sessions kept
// here alone: they belong to the partitions' owner.
func (c *Coordinator) UnloadMembers(in func(group string) bool) {
	for id, g := range c.groups {
		if !in(id) {
			continue
		}
		clear(g.Members)
		g.target, g.Epoch = nil, 0
		c.dropIfUnused(id, g)
	}
}

func (c *Coordinator) dropIfUnused(id string, g *Group) {
	if len(g.Members) == 0 && len(g.Partitions) == 0 && len(g.sessions) == 0 {
		delete(c.groups, id)
	}
}
