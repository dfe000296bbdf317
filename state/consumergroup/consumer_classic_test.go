package consumergroup

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/model"
)

// kmember is a classic (JoinGroup/SyncGroup) cooperative consumer in
// tests: it reports what it owns when it joins, takes what SyncGroup
// gives it, and rejoins when a heartbeat says REBALANCE_IN_PROGRESS.
type kmember struct {
	t        *testing.T
	g        *Group
	env      *fakeEnv
	id       string
	gen      int32
	instance *string
	topics   []string
	owned    map[string][]int32 // by topic name
}

func newKMember(t *testing.T, g *Group, env *fakeEnv, topics ...string) *kmember {
	return &kmember{t: t, g: g, env: env, gen: -1, topics: topics, owned: map[string][]int32{}}
}

func (k *kmember) joinRequest() JoinRequest {
	md := kmsg.ConsumerMemberMetadata{Version: 3, Topics: k.topics, Generation: k.gen}
	for _, topic := range slices.Sorted(func(yield func(string) bool) {
		for t := range k.owned {
			if !yield(t) {
				return
			}
		}
	}) {
		md.OwnedPartitions = append(md.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: topic, Partitions: k.owned[topic]})
	}
	return JoinRequest{MemberID: k.id, InstanceID: k.instance, ProtocolType: ConsumerProtocolType,
		Protocols:        []Protocol{{Name: "cooperative-sticky", Metadata: md.AppendTo(nil)}, {Name: "range", Metadata: md.AppendTo(nil)}},
		SessionTimeoutMs: 10_000, RebalanceTimeoutMs: 30_000, ClientID: "classic", ClientHost: "/127.0.0.1"}
}

// join sends JoinGroup and, if answered at once, adopts the answer.
func (k *kmember) join() JoinResult {
	k.t.Helper()
	p := k.g.joinAsync(k.joinRequest())
	k.env.flush()
	r := mustJoined(k.t, p)
	if r.Err == 0 {
		k.id, k.gen = r.MemberID, r.Generation
	}
	return r
}

func (k *kmember) sync() SyncResult {
	k.t.Helper()
	p := k.g.syncAsync(SyncRequest{MemberID: k.id, InstanceID: k.instance, Generation: k.gen})
	k.env.flush()
	if p.res == nil {
		k.t.Fatalf("%s: SyncGroup not answered", k.id)
	}
	if p.res.Err == 0 {
		k.adopt(p.res.Assignment)
	}
	return *p.res
}

func (k *kmember) adopt(b []byte) {
	k.t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		k.t.Fatalf("%s: assignment: %v", k.id, err)
	}
	k.owned = map[string][]int32{}
	for _, t := range a.Topics {
		k.owned[t.Topic] = slices.Clone(t.Partitions)
	}
}

func (k *kmember) beat() int16 {
	return k.g.Heartbeat(HeartbeatRequest{MemberID: k.id, InstanceID: k.instance, Generation: k.gen})
}

// step heartbeats, rejoining and syncing when told to.
func (k *kmember) step() {
	k.t.Helper()
	switch code := k.beat(); code {
	case 0:
	case errRebalanceInProgress:
		if r := k.join(); r.Err != 0 {
			k.t.Fatalf("%s: rejoin: %v", k.id, kerr.ErrorForCode(r.Err))
		}
		if r := k.sync(); r.Err != 0 && r.Err != errRebalanceInProgress {
			k.t.Fatalf("%s: sync: %v", k.id, kerr.ErrorForCode(r.Err))
		}
	default:
		k.t.Fatalf("%s: heartbeat: %v", k.id, kerr.ErrorForCode(code))
	}
}

// noDoubleOwnersMixed fails if two members of either protocol own one
// partition, and returns how many partitions are owned.
func noDoubleOwnersMixed(t *testing.T, env *fakeEnv, cs []*cmember, ks []*kmember) int {
	t.Helper()
	seen := map[string]string{}
	own := func(who, topic string, p int32) {
		k := fmt.Sprintf("%s-%d", topic, p)
		if other, ok := seen[k]; ok {
			t.Fatalf("partition %s owned by %s and %s", k, other, who)
		}
		seen[k] = who
	}
	for _, c := range cs {
		for id, ps := range c.owned {
			name, _ := env.topics.ByID(id)
			for _, p := range ps {
				own(c.id, name, p)
			}
		}
	}
	for _, k := range ks {
		for topic, ps := range k.owned {
			for _, p := range ps {
				own(k.id, topic, p)
			}
		}
	}
	return len(seen)
}

// settleMixed steps every member until the consumer group is Stable with
// every partition of want owned, never by two members at once.
func settleMixed(t *testing.T, g *Group, env *fakeEnv, want int, cs []*cmember, ks []*kmember) {
	t.Helper()
	for round := 0; round < 30; round++ {
		for _, c := range cs {
			c.mustOK(c.beat())
			noDoubleOwnersMixed(t, env, cs, ks)
		}
		for _, k := range ks {
			k.step()
			noDoubleOwnersMixed(t, env, cs, ks)
		}
		if g.cg.state == ConsumerStable && noDoubleOwnersMixed(t, env, cs, ks) == want {
			return
		}
	}
	t.Fatalf("group did not settle: state %s", g.cg.state)
}

// TestClassicMembersInConsumerGroup: a classic consumer joins a consumer
// group through JoinGroup/SyncGroup, is assigned by the server-side
// assignor with the same hand-over rules (REBALANCE_IN_PROGRESS when it
// must rejoin), commits with its generation, is described as classic, and
// leaves through LeaveGroup.
func TestClassicMembersInConsumerGroup(t *testing.T) {
	g, env := consumerGroupForTest(t)
	env.addTopic("t", 4)
	a := newCMember(t, g, env, "a", "t")
	a.mustOK(a.join())
	settle(t, g, a)

	if r := mustJoined(t, g.joinAsync(JoinRequest{ProtocolType: "connect", Protocols: []Protocol{{Name: "x"}}})); r.Err != errInconsistentProtocol {
		t.Fatalf("connect member joining a consumer group: %v", kerr.ErrorForCode(r.Err))
	}
	req := newKMember(t, g, env, "t").joinRequest()
	req.RequireKnownMemberID = true
	if r := mustJoined(t, g.joinAsync(req)); r.Err != errMemberIDRequired || r.MemberID == "" {
		t.Fatalf("v4 join without a member id: %v %q", kerr.ErrorForCode(r.Err), r.MemberID)
	}

	k := newKMember(t, g, env, "t")
	r := k.join()
	if r.Err != 0 || r.Leader != "" || r.ProtocolName == nil || *r.ProtocolName != "cooperative-sticky" || r.Generation != g.cg.epoch {
		t.Fatalf("classic join: %+v (epoch %d)", r, g.cg.epoch)
	}
	if res := k.sync(); res.Err != 0 || len(k.owned) != 0 {
		t.Fatalf("first sync: %v, owned %v (a has not revoked yet)", kerr.ErrorForCode(res.Err), k.owned)
	}
	settleMixed(t, g, env, 4, []*cmember{a}, []*kmember{k})
	if len(k.owned["t"]) != 2 || a.owned.count() != 2 {
		t.Fatalf("after settling: classic %v, consumer %v", k.owned, a.owned)
	}

	// Offsets: the generation is the member epoch, checked as for a
	// classic group; OffsetCommit below v9 is fine for a classic member.
	commit := func(gen int32) int16 {
		var code int16 = -1
		g.CommitOffsets(CommitRequest{Version: 8, MemberID: k.id, Generation: gen,
			Offsets: map[model.TopicPartition]Offset{{Topic: "t", Partition: k.owned["t"][0]}: {Offset: 5, LeaderEpoch: -1, ExpireTimestamp: -1}}},
			func(c map[model.TopicPartition]int16) {
				for _, v := range c {
					code = v
				}
			})
		env.flush()
		return code
	}
	if c := commit(k.gen); c != 0 {
		t.Fatalf("classic member commit: %v", kerr.ErrorForCode(c))
	}
	if c := commit(k.gen - 1); c != errIllegalGeneration {
		t.Fatalf("classic member commit with an old generation: %v", kerr.ErrorForCode(c))
	}
	if c := g.ValidateOffsetFetch(&k.id, k.gen+1); c != errIllegalGeneration {
		t.Fatalf("classic member offset fetch with a wrong generation: %v", kerr.ErrorForCode(c))
	}
	if c := g.Heartbeat(HeartbeatRequest{MemberID: a.id, Generation: a.epoch}); c != errUnknownMemberID {
		t.Fatalf("classic heartbeat from a consumer protocol member: %v", kerr.ErrorForCode(c))
	}
	var classic int
	for _, m := range g.ConsumerDescribe().Members {
		if m.Classic != (m.MemberID == k.id) {
			t.Fatalf("describe: member %s classic=%v", m.MemberID, m.Classic)
		}
		if m.Classic {
			classic++
		}
	}
	if classic != 1 {
		t.Fatalf("describe shows %d classic members", classic)
	}

	// LeaveGroup: the classic member goes, the consumer member takes
	// everything back.
	epoch := g.cg.epoch
	var code int16 = -1
	var res []LeaveResult
	g.Leave([]LeaveMember{{MemberID: k.id}, {MemberID: a.id}}, func(c int16, r []LeaveResult) { code, res = c, r })
	if code != -1 {
		t.Fatal("LeaveGroup to a consumer group answered before its write was durable")
	}
	env.flush()
	if code != 0 || len(res) != 2 || res[0].Err != 0 || res[1].Err != errUnknownMemberID {
		t.Fatalf("LeaveGroup: %d %+v (a consumer protocol member cannot leave through LeaveGroup)", code, res)
	}
	if g.cg.epoch != epoch+1 || g.cg.members[k.id] != nil || g.cg.members[a.id] == nil {
		t.Fatalf("after LeaveGroup: epoch %d (was %d), members %v", g.cg.epoch, epoch, g.cg.sortedMemberIDs())
	}
	settle(t, g, a)
	if a.owned.count() != 4 {
		t.Fatalf("consumer member owns %d partitions after the classic one left", a.owned.count())
	}

	// A classic member that joins and never syncs is fenced after its
	// rebalance timeout (30 s here; the consumer member's session is 45 s).
	k3 := newKMember(t, g, env, "t")
	if r := k3.join(); r.Err != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(r.Err))
	}
	env.advance(31 * time.Second)
	if g.cg.members[k3.id] != nil || g.cg.members[a.id] == nil {
		t.Fatalf("after the sync timeout: members %v", g.cg.sortedMemberIDs())
	}
}

// classicAssign is a consumer protocol assignment of topic's partitions.
func classicAssign(topic string, ps ...int32) []byte {
	a := kmsg.ConsumerMemberAssignment{Version: 3, Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: ps}}}
	return a.AppendTo(nil)
}

// formClassic brings two classic members through a classic rebalance,
// the leader giving each half of topic t's 4 partitions.
func formClassic(t *testing.T, g *Group, env *fakeEnv) (*kmember, *kmember) {
	t.Helper()
	k1, k2 := newKMember(t, g, env, "t"), newKMember(t, g, env, "t")
	p1, p2 := g.joinAsync(k1.joinRequest()), g.joinAsync(k2.joinRequest())
	env.advance(time.Second)
	r1, r2 := mustJoined(t, p1), mustJoined(t, p2)
	if r1.Err != 0 || r2.Err != 0 {
		t.Fatalf("classic joins: %d %d", r1.Err, r2.Err)
	}
	k1.id, k1.gen, k2.id, k2.gen = r1.MemberID, r1.Generation, r2.MemberID, r2.Generation
	if r1.Leader != k1.id {
		k1, k2 = k2, k1
	}
	plan := map[string][]byte{k1.id: classicAssign("t", 0, 1), k2.id: classicAssign("t", 2, 3)}
	s1 := g.syncAsync(SyncRequest{MemberID: k1.id, Generation: k1.gen, Assignments: plan})
	s2 := g.syncAsync(SyncRequest{MemberID: k2.id, Generation: k2.gen})
	env.flush()
	if s1.res == nil || s2.res == nil || s1.res.Err != 0 || s2.res.Err != 0 || g.State() != Stable {
		t.Fatalf("classic syncs: %+v %+v, state %s", s1.res, s2.res, g.State())
	}
	k1.adopt(s1.res.Assignment)
	k2.adopt(s2.res.Assignment)
	return k1, k2
}

// TestClassicGroupUpgradeAndDowngrade: a consumer protocol member joining
// a Stable classic group converts it in place (the classic members keep
// their partitions and generation, then rejoin to follow the new epoch,
// never sharing a partition); the mixed group survives a reload; when
// the consumer member leaves, the group becomes a classic group again and
// rebalances. With the policy disabled, neither conversion happens.
func TestClassicGroupUpgradeAndDowngrade(t *testing.T) {
	g, env := consumerGroupForTest(t)
	env.addTopic("t", 4)
	k1, k2 := formClassic(t, g, env)
	gen := g.Generation()

	c := newCMember(t, g, env, "c", "t")
	c.mustOK(c.join())
	if g.cg == nil || g.cg.epoch != gen+1 || g.cg.members[k1.id] == nil || g.cg.members[k1.id].Epoch != gen {
		t.Fatalf("upgrade: %+v", g.cg)
	}
	if !g.cg.members[k1.id].Assigned.equal(g.cg.target[k1.id]) && g.cg.target[k1.id].count() > 2 {
		t.Fatal("upgrade did not carry the classic assignment over")
	}
	if c.owned.count() != 0 {
		t.Fatalf("the new member got %v while the classic members still own everything", c.owned)
	}
	ks := []*kmember{k1, k2}
	settleMixed(t, g, env, 4, []*cmember{c}, ks)

	// The classic members and their protocols survive a reload.
	g2, _ := reload(t, g, env)
	for _, k := range ks {
		m1, m2 := g.cg.members[k.id], g2.cg.members[k.id]
		if m2 == nil || m2.Classic == nil || !m1.sameMetadata(m2) || !m1.sameAssignment(m2) {
			t.Fatalf("classic member %s after reload:\n%+v\n%+v", k.id, m1, m2)
		}
	}

	// The consumer member leaves: only classic members remain, so the
	// group is a classic group again, rebalancing from the group epoch.
	epoch := g.cg.epoch
	c.send(ConsumerHeartbeatRequest{Version: 1, MemberID: c.id, MemberEpoch: -1})
	if g.cg != nil || g.State() != PreparingRebalance || g.Generation() != epoch || len(g.members) != 2 {
		t.Fatalf("downgrade: consumer %v, state %s, generation %d (epoch was %d), %d members", g.cg != nil, g.State(), g.Generation(), epoch, len(g.members))
	}
	for _, k := range ks {
		if code := k.beat(); code != errRebalanceInProgress {
			t.Fatalf("classic member after the downgrade: %v", kerr.ErrorForCode(code))
		}
	}
	p1, p2 := g.joinAsync(k1.joinRequest()), g.joinAsync(k2.joinRequest())
	env.flush()
	r1, r2 := mustJoined(t, p1), mustJoined(t, p2)
	if r1.Err != 0 || r2.Err != 0 || r1.Generation != epoch+1 || g.State() != CompletingRebalance {
		t.Fatalf("classic rejoin after the downgrade: %+v %+v, state %s", r1, r2, g.State())
	}

	// Disabled: a consumer member cannot join a non-empty classic group.
	cfg := testConfig()
	cfg.MigrationPolicy = MigrationDisabled
	g3, env3 := newGroup(t, cfg)
	env3.addTopic("t", 4)
	formClassic(t, g3, env3)
	if res := newCMember(t, g3, env3, "c", "t").join(); res.Err != errGroupIDNotFound || g3.cg != nil {
		t.Fatalf("heartbeat to a classic group with migration disabled: %v", kerr.ErrorForCode(res.Err))
	}
}

// TestClassicStaticMemberDowngrades: the last consumer protocol member is
// static; it comes back as a classic consumer with the same instance id,
// taking over its partitions, and the group is a classic group again at
// once (Apache's downgrade on static member replacement), no rebalance.
func TestClassicStaticMemberDowngrades(t *testing.T) {
	g, env := consumerGroupForTest(t)
	env.addTopic("t", 4)
	inst := "i1"
	s := newCMember(t, g, env, "s", "t")
	s.instance = &inst
	s.mustOK(s.join())
	k := newKMember(t, g, env, "t")
	if r := k.join(); r.Err != 0 {
		t.Fatalf("classic join: %v", kerr.ErrorForCode(r.Err))
	}
	settleMixed(t, g, env, 4, []*cmember{s}, []*kmember{k})
	target := g.cg.target[s.id].clone()

	ks := newKMember(t, g, env, "t")
	ks.instance = &inst
	r := ks.join()
	if r.Err != 0 || g.cg != nil || g.State() != Stable || len(g.members) != 2 || g.members[s.id] != nil {
		t.Fatalf("static classic takeover: %+v; consumer %v, state %s, members %d", r, g.cg != nil, g.State(), len(g.members))
	}
	if res := ks.sync(); res.Err != 0 || len(ks.owned["t"]) != target.count() {
		t.Fatalf("sync after the downgrade: %v, owned %v, the replaced member's target %v", kerr.ErrorForCode(res.Err), ks.owned, target)
	}
}
