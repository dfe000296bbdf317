package consumergroup

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/storage/offsetlog"
)

func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		from, to State
		ok       bool
	}{
		{Empty, PreparingRebalance, true},
		{Stable, PreparingRebalance, true},
		{CompletingRebalance, PreparingRebalance, true},
		{PreparingRebalance, CompletingRebalance, true},
		{PreparingRebalance, Empty, true},
		{CompletingRebalance, Stable, true},
		{Empty, Dead, true},
		{Stable, Dead, true},
		{Dead, Dead, true},
		{Empty, Stable, false},
		{Stable, CompletingRebalance, false},
		{Dead, Empty, false},
		{PreparingRebalance, Stable, false},
		{Empty, CompletingRebalance, false},
	} {
		if got := CanTransition(tc.from, tc.to); got != tc.ok {
			t.Errorf("%s → %s: %v, want %v", tc.from, tc.to, got, tc.ok)
		}
	}
}

// TestJoinRejections covers JoinGroup answers that never reach a
// rebalance.
func TestJoinRejections(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, g *Group, env *fakeEnv)
		req    func() JoinRequest
		code   int16
		member string // "" or "same" (echoes the request's member id) or "new"
	}{
		{"unknown member id on an empty group", nil, func() JoinRequest { return joinReq("ghost") }, kerr.UnknownMemberID.Code, "same"},
		{"no protocol type", nil, func() JoinRequest { r := joinReq(""); r.ProtocolType = ""; return r }, kerr.InconsistentGroupProtocol.Code, ""},
		{"no protocols", nil, func() JoinRequest { r := joinReq(""); r.Protocols = nil; return r }, kerr.InconsistentGroupProtocol.Code, ""},
		{"other protocol type than the group", func(t *testing.T, g *Group, env *fakeEnv) { formGroup(t, g, env, 1, "a") },
			func() JoinRequest { r := joinReq(""); r.ProtocolType = "connect"; return r }, kerr.InconsistentGroupProtocol.Code, ""},
		{"no protocol in common", func(t *testing.T, g *Group, env *fakeEnv) { formGroup(t, g, env, 1, "a") },
			func() JoinRequest { r := joinReq(""); r.Protocols[0].Name = "sticky"; return r }, kerr.InconsistentGroupProtocol.Code, ""},
		{"KIP-394 first join gets a member id", nil,
			func() JoinRequest { r := joinReq(""); r.RequireKnownMemberID = true; return r }, kerr.MemberIDRequired.Code, "new"},
		{"group max size", func(t *testing.T, g *Group, env *fakeEnv) { g.cfg.MaxSize = 1; formGroup(t, g, env, 1, "a") },
			func() JoinRequest { return joinReq("") }, kerr.GroupMaxSizeReached.Code, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, env := newGroup(t, testConfig())
			if tc.setup != nil {
				tc.setup(t, g, env)
			}
			req := tc.req()
			p := g.joinAsync(req)
			r := mustJoined(t, p)
			if r.Err != tc.code {
				t.Fatalf("code %d, want %d", r.Err, tc.code)
			}
			switch tc.member {
			case "":
				if r.MemberID != "" {
					t.Errorf("member id %q, want empty", r.MemberID)
				}
			case "same":
				if r.MemberID != req.MemberID {
					t.Errorf("member id %q, want %q", r.MemberID, req.MemberID)
				}
			case "new":
				if !strings.HasPrefix(r.MemberID, "c-") {
					t.Errorf("member id %q, want client id prefix", r.MemberID)
				}
			}
		})
	}
}

// TestFirstRebalance follows KIP-394's two-step join, the initial
// rebalance delay, the leader's member list and the durable assignment.
func TestFirstRebalance(t *testing.T) {
	g, env := newGroup(t, testConfig())
	req := joinReq("", "a")
	req.RequireKnownMemberID = true
	first := mustJoined(t, g.joinAsync(req))
	if first.Err != kerr.MemberIDRequired.Code || g.State() != Empty {
		t.Fatalf("first join: %+v in %s", first, g.State())
	}
	req.MemberID = first.MemberID
	p := g.joinAsync(req)
	if g.State() != PreparingRebalance || p.res != nil {
		t.Fatalf("second join should park in PreparingRebalance, got %s answered=%v", g.State(), p.res != nil)
	}
	env.advance(50 * time.Millisecond)
	if p.res != nil {
		t.Fatal("answered before the initial rebalance delay")
	}
	env.advance(60 * time.Millisecond)
	r := mustJoined(t, p)
	if r.Err != 0 || r.Generation != 1 || r.Leader != first.MemberID || len(r.Members) != 1 || *r.ProtocolName != "range" || *r.ProtocolType != "consumer" {
		t.Fatalf("join result %+v", r)
	}
	if g.State() != CompletingRebalance {
		t.Fatalf("state %s", g.State())
	}
	s := g.syncAsync(SyncRequest{MemberID: r.MemberID, Generation: 1, Assignments: map[string][]byte{r.MemberID: []byte("x")}})
	if s.res != nil {
		t.Fatal("sync answered before the assignment was durable")
	}
	env.flush()
	if s.res == nil || s.res.Err != 0 || string(s.res.Assignment) != "x" || g.State() != Stable {
		t.Fatalf("sync %+v state %s", s.res, g.State())
	}
	if n := len(env.persisted); n != 1 || env.persisted[0].Records[0].Value == nil {
		t.Fatalf("expected one group metadata record, got %d entries", n)
	}
	if env.rebalances != 1 {
		t.Fatalf("rebalances = %d", env.rebalances)
	}
}

// TestSecondMemberRebalances: a new member makes a Stable group rebalance;
// the old member learns through its heartbeat, rejoins, and both end in
// generation 2 with the partitions split by the leader.
func TestSecondMemberRebalances(t *testing.T) {
	g, env := newGroup(t, testConfig())
	ids := formGroup(t, g, env, 1, "a")
	p2 := g.joinAsync(joinReq("", "a"))
	if g.State() != PreparingRebalance {
		t.Fatalf("state %s", g.State())
	}
	if code := g.Heartbeat(HeartbeatRequest{MemberID: ids[0], Generation: 1}); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat = %d", code)
	}
	p1 := g.joinAsync(joinReq(ids[0], "a"))
	// Both joined: no need to wait for the rebalance timeout.
	r1, r2 := mustJoined(t, p1), mustJoined(t, p2)
	if r1.Generation != 2 || r2.Generation != 2 || r1.Leader != ids[0] || len(r1.Members) != 2 || len(r2.Members) != 0 {
		t.Fatalf("results %+v / %+v", r1, r2)
	}
	syncAll(t, g, env, []string{ids[0], r2.MemberID})
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	g, env := newGroup(t, testConfig())
	ids := formGroup(t, g, env, 2, "a")
	// Only the leader keeps heartbeating.
	for i := 0; i < 4; i++ {
		env.advance(3 * time.Second)
		if code := g.Heartbeat(HeartbeatRequest{MemberID: ids[0], Generation: 1}); code != 0 {
			if code == kerr.RebalanceInProgress.Code {
				break
			}
			t.Fatalf("heartbeat = %d", code)
		}
	}
	if g.State() != PreparingRebalance || g.members[ids[1]] != nil {
		t.Fatalf("silent member still there: state %s", g.State())
	}
	p := g.joinAsync(joinReq(ids[0], "a"))
	r := mustJoined(t, p)
	if r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("rejoin %+v", r)
	}
}

func TestLeaveGroup(t *testing.T) {
	g, env := newGroup(t, testConfig())
	ids := formGroup(t, g, env, 2, "a")
	static := "inst-1"
	top, res := leaveNow(g, []LeaveMember{{MemberID: ids[1]}, {MemberID: "ghost"}, {InstanceID: &static}})
	if top != 0 || len(res) != 3 || res[0].Err != 0 || res[1].Err != kerr.UnknownMemberID.Code || res[2].Err != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: %d %+v", top, res)
	}
	if g.State() != PreparingRebalance {
		t.Fatalf("state %s", g.State())
	}
	r := mustJoined(t, g.joinAsync(joinReq(ids[0], "a")))
	if r.Generation != 2 || len(r.Members) != 1 {
		t.Fatalf("rejoin %+v", r)
	}
	// The last member leaving empties the group.
	syncAll(t, g, env, ids[:1])
	leaveNow(g, []LeaveMember{{MemberID: ids[0]}})
	env.advance(time.Minute)
	if g.State() != Empty || g.Generation() != 3 {
		t.Fatalf("state %s generation %d", g.State(), g.Generation())
	}
}

func TestHeartbeatErrors(t *testing.T) {
	g, env := newGroup(t, testConfig())
	ids := formGroup(t, g, env, 1, "a")
	inst, other := "i", "j"
	for _, tc := range []struct {
		name string
		req  HeartbeatRequest
		code int16
	}{
		{"ok", HeartbeatRequest{MemberID: ids[0], Generation: 1}, 0},
		{"old generation", HeartbeatRequest{MemberID: ids[0], Generation: 0}, kerr.IllegalGeneration.Code},
		{"unknown member", HeartbeatRequest{MemberID: "x", Generation: 1}, kerr.UnknownMemberID.Code},
		{"unknown instance id", HeartbeatRequest{MemberID: ids[0], InstanceID: &other, Generation: 1}, kerr.UnknownMemberID.Code},
		{"instance id of no member", HeartbeatRequest{MemberID: ids[0], InstanceID: &inst, Generation: 1}, kerr.UnknownMemberID.Code},
	} {
		if code := g.Heartbeat(tc.req); code != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.code)
		}
	}
}

// TestStaticMemberRejoinsWithoutRebalance is KIP-345: a restarted static
// member gets a new member id, the same generation and its assignment,
// and its old member id is fenced.
func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	g, env := newGroup(t, testConfig())
	inst := "inst-a"
	req := joinReq("", "a")
	req.InstanceID = &inst
	p := g.joinAsync(req)
	env.advance(time.Second)
	r := mustJoined(t, p)
	oldID := r.MemberID
	if !strings.HasPrefix(oldID, "inst-a-") {
		t.Fatalf("static member id %q", oldID)
	}
	syncAll(t, g, env, []string{oldID})
	rebalances := env.rebalances

	// Restart: same instance id, no member id, as of JoinGroup v9.
	req.SupportSkipAssignment = true
	p = g.joinAsync(req)
	env.flush()
	r = mustJoined(t, p)
	if r.Err != 0 || r.Generation != 1 || r.MemberID == oldID || !r.SkipAssignment || r.Leader != r.MemberID {
		t.Fatalf("rejoin %+v", r)
	}
	if env.rebalances != rebalances || g.State() != Stable {
		t.Fatalf("rejoin rebalanced: %d → %d, state %s", rebalances, env.rebalances, g.State())
	}
	s := g.syncAsync(SyncRequest{MemberID: r.MemberID, InstanceID: &inst, Generation: 1})
	if s.res == nil || s.res.Err != 0 || string(s.res.Assignment) != "assign:"+oldID {
		t.Fatalf("sync after rejoin %+v", s.res)
	}
	if code := g.Heartbeat(HeartbeatRequest{MemberID: oldID, InstanceID: &inst, Generation: 1}); code != kerr.FencedInstanceID.Code {
		t.Fatalf("old member id heartbeat = %d, want FENCED_INSTANCE_ID", code)
	}
	// Static members survive a missed rejoin: a rebalance waits for them.
	top, res := leaveNow(g, []LeaveMember{{InstanceID: &inst}})
	if top != 0 || res[0].Err != 0 || len(g.members) != 0 {
		t.Fatalf("admin leave by instance id: %d %+v", top, res)
	}
}

func TestPendingSyncExpiry(t *testing.T) {
	g, env := newGroup(t, testConfig())
	p1, p2 := g.joinAsync(joinReq("", "a")), g.joinAsync(joinReq("", "a"))
	env.advance(time.Second)
	r1, r2 := mustJoined(t, p1), mustJoined(t, p2)
	leader, follower := r1, r2
	if r2.MemberID == r1.Leader {
		leader, follower = r2, r1
	}
	g.syncAsync(SyncRequest{MemberID: leader.MemberID, Generation: 1, Assignments: map[string][]byte{leader.MemberID: []byte("l"), follower.MemberID: []byte("f")}})
	env.flush()
	if g.State() != Stable {
		t.Fatalf("state %s", g.State())
	}
	// The follower never syncs: after the rebalance timeout it is dropped.
	for i := 0; i < 15; i++ {
		env.advance(2 * time.Second)
		g.Heartbeat(HeartbeatRequest{MemberID: leader.MemberID, Generation: g.Generation()})
	}
	if g.members[follower.MemberID] != nil || g.State() != PreparingRebalance {
		t.Fatalf("follower not expired: state %s", g.State())
	}
}

func TestOffsetCommitValidation(t *testing.T) {
	tp := model.TopicPartition{Topic: "a", Partition: 0}
	offsets := func(meta string) map[model.TopicPartition]Offset {
		return map[model.TopicPartition]Offset{tp: {Offset: 5, LeaderEpoch: -1, Metadata: meta, CommitTimestamp: 1, ExpireTimestamp: -1}}
	}
	for _, tc := range []struct {
		name   string
		stable bool
		req    func(ids []string) CommitRequest
		code   int16
	}{
		{"no group management on an empty group", false, func([]string) CommitRequest { return CommitRequest{Generation: -1, Offsets: offsets("")} }, 0},
		{"no member on a live group", true, func([]string) CommitRequest { return CommitRequest{Generation: -1, Offsets: offsets("")} }, kerr.UnknownMemberID.Code},
		{"member of the generation", true, func(ids []string) CommitRequest {
			return CommitRequest{MemberID: ids[0], Generation: 1, Offsets: offsets("")}
		}, 0},
		{"old generation", true, func(ids []string) CommitRequest {
			return CommitRequest{MemberID: ids[0], Generation: 0, Offsets: offsets("")}
		}, kerr.IllegalGeneration.Code},
		{"unknown member", true, func([]string) CommitRequest { return CommitRequest{MemberID: "x", Generation: 1, Offsets: offsets("")} }, kerr.UnknownMemberID.Code},
		{"generation on an empty group", false, func([]string) CommitRequest { return CommitRequest{MemberID: "x", Generation: 3, Offsets: offsets("")} }, kerr.UnknownMemberID.Code},
		{"metadata too large", false, func([]string) CommitRequest {
			return CommitRequest{Generation: -1, Offsets: offsets(strings.Repeat("m", 4097))}
		}, kerr.OffsetMetadataTooLarge.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, env := newGroup(t, testConfig())
			var ids []string
			if tc.stable {
				ids = formGroup(t, g, env, 1, "a")
			}
			var got map[model.TopicPartition]int16
			g.CommitOffsets(tc.req(ids), func(m map[model.TopicPartition]int16) { got = m })
			env.flush()
			if got == nil || got[tp] != tc.code {
				t.Fatalf("codes %v, want %d", got, tc.code)
			}
			want := int64(-1)
			if tc.code == 0 {
				want = 5
			}
			if f := g.FetchOffsets([]model.TopicPartition{tp}, false); f[0].Offset != want {
				t.Fatalf("fetched %+v, want offset %d", f[0], want)
			}
		})
	}
}

func TestCommitDuringCompletingRebalance(t *testing.T) {
	g, env := newGroup(t, testConfig())
	p := g.joinAsync(joinReq("", "a"))
	env.advance(time.Second)
	r := mustJoined(t, p)
	var got map[model.TopicPartition]int16
	tp := model.TopicPartition{Topic: "a"}
	g.CommitOffsets(CommitRequest{MemberID: r.MemberID, Generation: 1, Offsets: map[model.TopicPartition]Offset{tp: {Offset: 1, ExpireTimestamp: -1}}}, func(m map[model.TopicPartition]int16) { got = m })
	if got[tp] != kerr.RebalanceInProgress.Code {
		t.Fatalf("codes %v", got)
	}
}

// TestRequireStableSeesInFlightCommit: a plain commit not yet durable is
// invisible, and UNSTABLE_OFFSET_COMMIT under require_stable.
func TestRequireStableSeesInFlightCommit(t *testing.T) {
	g, env := newGroup(t, testConfig())
	tp := model.TopicPartition{Topic: "a"}
	g.CommitOffsets(CommitRequest{Generation: -1, Offsets: map[model.TopicPartition]Offset{tp: {Offset: 7, ExpireTimestamp: -1}}}, func(map[model.TopicPartition]int16) {})
	if f := g.FetchOffsets([]model.TopicPartition{tp}, true); f[0].Err != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable during write: %+v", f[0])
	}
	if f := g.FetchOffsets([]model.TopicPartition{tp}, false); f[0].Offset != -1 {
		t.Fatalf("read during write: %+v", f[0])
	}
	env.flush()
	if f := g.FetchOffsets([]model.TopicPartition{tp}, true); f[0].Err != 0 || f[0].Offset != 7 {
		t.Fatalf("after write: %+v", f[0])
	}
}

// TestTxnOffsets is R-TXN-12/13 and R-RC-6 inside the group: staged
// offsets are invisible until CompleteTxn, which commits or drops them.
func TestTxnOffsets(t *testing.T) {
	tp := model.TopicPartition{Topic: "a", Partition: 0}
	commit := func(g *Group, env *fakeEnv, pid int64, off int64, member string, gen int32) int16 {
		var got map[model.TopicPartition]int16
		g.CommitTxnOffsets(CommitRequest{MemberID: member, Generation: gen, ProducerID: pid, ProducerEpoch: 0,
			Offsets: map[model.TopicPartition]Offset{tp: {Offset: off, LeaderEpoch: -1, ExpireTimestamp: -1}}}, func(m map[model.TopicPartition]int16) { got = m })
		env.flush()
		return got[tp]
	}
	for _, tc := range []struct {
		name      string
		commit    bool
		wantAfter int64
	}{
		{"commit materialises", true, 10},
		{"abort discards", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, env := newGroup(t, testConfig())
			g.CommitOffsets(CommitRequest{Generation: -1, Offsets: map[model.TopicPartition]Offset{tp: {Offset: 3, ExpireTimestamp: -1}}}, func(map[model.TopicPartition]int16) {})
			env.flush()
			if code := commit(g, env, 42, 10, "", -1); code != 0 {
				t.Fatalf("txn commit = %d", code)
			}
			if f := g.FetchOffsets([]model.TopicPartition{tp}, false); f[0].Offset != 3 {
				t.Fatalf("staged offset visible: %+v", f[0])
			}
			if f := g.FetchOffsets([]model.TopicPartition{tp}, true); f[0].Err != kerr.UnstableOffsetCommit.Code || f[0].Offset != -1 {
				t.Fatalf("require_stable: %+v", f[0])
			}
			g.CompleteTxn(42, tc.commit)
			if f := g.FetchOffsets([]model.TopicPartition{tp}, true); f[0].Err != 0 || f[0].Offset != tc.wantAfter {
				t.Fatalf("after marker: %+v", f[0])
			}
		})
	}
	t.Run("group checks", func(t *testing.T) {
		g, env := newGroup(t, testConfig())
		ids := formGroup(t, g, env, 1, "a")
		for _, c := range []struct {
			member string
			gen    int32
			code   int16
		}{
			{ids[0], 1, 0},
			{ids[0], 0, kerr.IllegalGeneration.Code},
			{"zz", 1, kerr.UnknownMemberID.Code},
			{"", -1, 0}, // no member information is fine on a live group
		} {
			if code := commit(g, env, 7, 1, c.member, c.gen); code != c.code {
				t.Errorf("member %q gen %d: %d, want %d", c.member, c.gen, code, c.code)
			}
		}
	})
}

func TestDeleteGroupAndOffsets(t *testing.T) {
	tpA, tpB := model.TopicPartition{Topic: "a"}, model.TopicPartition{Topic: "b"}
	g, env := newGroup(t, testConfig())
	ids := formGroup(t, g, env, 1, "a")
	g.CommitOffsets(CommitRequest{MemberID: ids[0], Generation: 1, Offsets: map[model.TopicPartition]Offset{tpA: {Offset: 1, ExpireTimestamp: -1}, tpB: {Offset: 2, ExpireTimestamp: -1}}}, func(map[model.TopicPartition]int16) {})
	env.flush()

	var code int16 = -2
	g.Delete(func(c int16) { code = c })
	if code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete live group = %d", code)
	}
	var groupCode int16
	var codes map[model.TopicPartition]int16
	g.DeleteOffsets([]model.TopicPartition{tpA, tpB}, func(gc int16, c map[model.TopicPartition]int16) { groupCode, codes = gc, c })
	env.flush()
	if groupCode != 0 || codes[tpA] != kerr.GroupSubscribedToTopic.Code || codes[tpB] != 0 {
		t.Fatalf("offset delete: %d %v", groupCode, codes)
	}
	if f := g.FetchOffsets(nil, false); len(f) != 1 || f[0].TP != tpA {
		t.Fatalf("offsets left %+v", f)
	}

	leaveNow(g, []LeaveMember{{MemberID: ids[0]}})
	env.advance(time.Minute)
	code = -2
	g.Delete(func(c int16) { code = c })
	env.flush()
	if code != 0 || g.State() != Dead {
		t.Fatalf("delete empty group = %d, state %s", code, g.State())
	}
	last := env.persisted[len(env.persisted)-1]
	if len(last.Records) != 2 || last.Records[0].Value != nil || last.Records[1].Value != nil {
		t.Fatalf("expected an offset and a group tombstone, got %+v", last.Records)
	}
	g.Delete(func(c int16) { code = c })
	if code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete dead group = %d", code)
	}
}

// TestOffsetsExpireAfterGroupEmpties: offsets.retention.minutes counts
// from when the group became Empty; then the group dies.
func TestOffsetsExpireAfterGroupEmpties(t *testing.T) {
	cfg := testConfig()
	cfg.OffsetsRetention = time.Hour
	g, env := newGroup(t, cfg)
	ids := formGroup(t, g, env, 1, "a")
	tp := model.TopicPartition{Topic: "a"}
	g.CommitOffsets(CommitRequest{MemberID: ids[0], Generation: 1, Offsets: map[model.TopicPartition]Offset{tp: {Offset: 1, CommitTimestamp: env.now.UnixMilli(), ExpireTimestamp: -1}}}, func(map[model.TopicPartition]int16) {})
	env.flush()
	for i := 0; i < 2*3600/5; i++ { // two hours of a live member
		env.advance(5 * time.Second)
		if code := g.Heartbeat(HeartbeatRequest{MemberID: ids[0], Generation: 1}); code != 0 {
			t.Fatalf("heartbeat = %d", code)
		}
	}
	g.ExpireOffsets(func() {})
	if len(g.offsets) != 1 {
		t.Fatal("offsets of a subscribed topic expired while the group was alive")
	}
	leaveNow(g, []LeaveMember{{MemberID: ids[0]}})
	env.advance(time.Minute)
	if g.State() != Empty {
		t.Fatalf("state %s", g.State())
	}
	env.advance(30 * time.Minute)
	g.ExpireOffsets(func() {})
	if len(g.offsets) != 1 {
		t.Fatal("offsets expired before the retention passed since the group emptied")
	}
	env.advance(31 * time.Minute)
	g.ExpireOffsets(func() {})
	env.flush()
	if len(g.offsets) != 0 || g.State() != Dead {
		t.Fatalf("offsets %d state %s", len(g.offsets), g.State())
	}
}

// TestLoadRestoresStableGroup: the stored metadata brings members back
// Stable with their assignments and session timers.
func TestLoadRestoresStableGroup(t *testing.T) {
	g, env := newGroup(t, testConfig())
	ids := formGroup(t, g, env, 2, "a")
	var md = g.metadataValue(g.assignments())
	env2 := newEnv(t)
	loaded := Load("g", testConfig(), env2, g.log, &offsetlog.GroupState{Metadata: md, Offsets: map[model.TopicPartition]Offset{}, Pending: map[int64]map[model.TopicPartition]Offset{}})
	env2.g = loaded
	if loaded.State() != Stable || loaded.Generation() != 1 || loaded.leader != ids[0] || len(loaded.members) != 2 {
		t.Fatalf("loaded %+v", loaded.Summarize())
	}
	s := loaded.syncAsync(SyncRequest{MemberID: ids[1], Generation: 1})
	if s.res == nil || string(s.res.Assignment) != "assign:"+ids[1] {
		t.Fatalf("sync after load %+v", s.res)
	}
	// Members that never come back expire.
	env2.advance(11 * time.Second)
	if len(loaded.members) != 0 {
		// The first expiry starts a rebalance; the rebalance removes the
		// rest once its timeout passes.
		env2.advance(time.Minute)
	}
	if loaded.State() != Empty {
		t.Fatalf("state after members vanished: %s (%d members)", loaded.State(), len(loaded.members))
	}
}

// TestRebalanceTimeoutDropsMembersThatDoNotRejoin: a member that keeps
// heartbeating but never rejoins is dropped when the rebalance timeout
// ends the join phase; a static member that does not rejoin is kept.
func TestRebalanceTimeoutDropsMembersThatDoNotRejoin(t *testing.T) {
	g, env := newGroup(t, testConfig())
	inst := "s"
	static := joinReq("", "a")
	static.InstanceID = &inst
	ps := g.joinAsync(static)
	pd1, pd2 := g.joinAsync(joinReq("", "a")), g.joinAsync(joinReq("", "a"))
	env.advance(time.Second)
	rs, r1, r2 := mustJoined(t, ps), mustJoined(t, pd1), mustJoined(t, pd2)
	syncAll(t, g, env, []string{rs.Leader, otherThan(rs.Leader, rs.MemberID, r1.MemberID, r2.MemberID)[0], otherThan(rs.Leader, rs.MemberID, r1.MemberID, r2.MemberID)[1]})

	// A fourth member joins; only the second dynamic member rejoins.
	p4 := g.joinAsync(joinReq("", "a"))
	pre := g.joinAsync(joinReq(r1.MemberID, "a"))
	for elapsed := time.Duration(0); elapsed < 28*time.Second; elapsed += 2 * time.Second {
		env.advance(2 * time.Second)
		for _, id := range []string{r2.MemberID} {
			if code := g.Heartbeat(HeartbeatRequest{MemberID: id, Generation: 1}); code != kerr.RebalanceInProgress.Code {
				t.Fatalf("heartbeat during the join phase = %d", code)
			}
		}
		if g.members[rs.MemberID] != nil {
			g.scheduleHeartbeat(g.members[rs.MemberID]) // the static member stays alive too
		}
	}
	if pre.res != nil || p4.res != nil {
		t.Fatal("join phase ended before the rebalance timeout")
	}
	env.advance(3 * time.Second) // the 30 s rebalance timeout passes
	rPre, r4 := mustJoined(t, pre), mustJoined(t, p4)
	if rPre.Generation != 2 || r4.Generation != 2 {
		t.Fatalf("generations %d %d", rPre.Generation, r4.Generation)
	}
	if g.members[r2.MemberID] != nil {
		t.Fatal("the member that did not rejoin is still in the group")
	}
	if g.members[rs.MemberID] == nil {
		t.Fatal("the static member that did not rejoin was dropped")
	}
}

func otherThan(leader string, ids ...string) []string {
	var out []string
	for _, id := range ids {
		if id != leader {
			out = append(out, id)
		}
	}
	return out
}

// leaveNow sends a LeaveGroup and returns its answer (classic groups
// answer at once; a consumer group's answer needs env.flush first).
func leaveNow(g *Group, members []LeaveMember) (int16, []LeaveResult) {
	var code int16 = -1
	var res []LeaveResult
	g.Leave(members, func(c int16, r []LeaveResult) { code, res = c, r })
	return code, res
}
