package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest/loopback"
)

// consumerGroupTimings gives KIP-848 groups test-sized timings: members
// heartbeat every 100 ms and are fenced after 3 s of silence.
func consumerGroupTimings(c *Config) {
	c.ConsumerHeartbeatInterval = 100 * time.Millisecond
	c.ConsumerSessionTimeout = 3 * time.Second
}

// start848Member is a franz-go member using the KIP-848 protocol with
// the broker's uniform assignor (kgo's sticky balancer asks for it).
func start848Member(t *testing.T, addr, group, topic, name string, opts ...kgo.Opt) *member {
	t.Helper()
	return startMember(t, addr, group, topic, name, append([]kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}, opts...)...)
}

func describe848(t *testing.T, adm *kadm.Client, group string) kadm.DescribedConsumerGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	return ds[group]
}

// TestConsumerGroup848SplitsAndTakesOver: franz-go members on the
// consumer protocol split six partitions, a third one joins, one leaves
// and the others take its partitions; ConsumerGroupDescribe shows the
// epochs, the assignor and every member's assignment, ListGroups the
// group's state, DescribeGroups (classic) answers Dead as Apache's does.
func TestConsumerGroup848SplitsAndTakesOver(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), consumerGroupTimings)
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "orders", 6)
	for p := int32(0); p < 6; p++ {
		produce(t, addr, "orders", p, 10)
	}

	a := start848Member(t, addr, "g848", "orders", "a")
	bm := start848Member(t, addr, "g848", "orders", "b")
	waitUntil(t, 15*time.Second, "two members split six partitions", func() (bool, string) { return balanced(6, a, bm) })
	c := start848Member(t, addr, "g848", "orders", "c")
	waitUntil(t, 15*time.Second, "three members split six partitions", func() (bool, string) { return balanced(6, a, bm, c) })
	waitUntil(t, 15*time.Second, "every record consumed", func() (bool, string) {
		return len(a.consumed())+len(bm.consumed())+len(c.consumed()) >= 60, ""
	})

	d := describe848(t, adm, "g848")
	if d.Err != nil || d.State != "Stable" || d.AssignorName != "uniform" || len(d.Members) != 3 || d.Epoch != d.AssignmentEpoch || d.Epoch < 3 {
		t.Fatalf("described: %+v", d)
	}
	for _, m := range d.Members {
		if m.MemberEpoch != d.Epoch || len(m.Assignment["orders"]) != 2 || len(m.TargetAssignment["orders"]) != 2 || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("member %+v", m)
		}
	}

	left := time.Now()
	c.close()
	waitUntil(t, 10*time.Second, "the two remaining members take over", func() (bool, string) { return balanced(6, a, bm) })
	t.Logf("takeover after the leave heartbeat: %v", time.Since(left))

	ctx := context.Background()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lg := listed["g848"]; lg.ProtocolType != "consumer" || lg.State != "Stable" {
		t.Fatalf("listed: %+v", lg)
	}
	classic, err := adm.DescribeGroups(ctx, "g848")
	if err != nil {
		t.Fatal(err)
	}
	if g := classic["g848"]; g.State != "Dead" || len(g.Members) != 0 {
		t.Fatalf("DescribeGroups of a consumer group: %+v", g)
	}
	if n := b.Metrics().Rebalances; n == nil {
		t.Fatal("no rebalance metric")
	}
}

// TestConsumerGroup848Errors drives ConsumerGroupHeartbeat and friends on
// the wire: Apache's INVALID_REQUEST messages, UNSUPPORTED_ASSIGNOR,
// GROUP_ID_NOT_FOUND for a group that is not there or classic,
// INVALID_REGULAR_EXPRESSION, FENCED_MEMBER_EPOCH, a classic JoinGroup
// refused by a consumer group, and OffsetCommit's STALE_MEMBER_EPOCH.
func TestConsumerGroup848Errors(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), consumerGroupTimings)
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "t", 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	hb := func(edit func(r *kmsg.ConsumerGroupHeartbeatRequest)) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "g", "m1", 0, 30000
		r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		edit(r)
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		edit func(r *kmsg.ConsumerGroupHeartbeatRequest)
		code int16
		msg  string
	}{
		{"no member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"join owning partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{1}}}
		}, kerr.InvalidRequest.Code, "TopicPartitions must be empty when (re-)joining."},
		{"no subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil },
			kerr.InvalidRequest.Code, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = str("cooperative-sticky") },
			kerr.UnsupportedAssignor.Code, "ServerAssignor cooperative-sticky is not supported. Supported assignors: uniform, range."},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, str("t(")
		},
			kerr.InvalidRegularExpression.Code, ""},
		{"heartbeat to a group that does not exist", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group, r.MemberEpoch = "nothere", 3 },
			kerr.GroupIDNotFound.Code, "Consumer group nothere not found."},
	} {
		resp := hb(tc.edit)
		if resp.ErrorCode != tc.code || (tc.msg != "" && (resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg)) {
			t.Errorf("%s: code %d message %v, want %d %q", tc.name, resp.ErrorCode, resp.ErrorMessage, tc.code, tc.msg)
		}
	}

	resp := hb(func(*kmsg.ConsumerGroupHeartbeatRequest) {})
	if resp.ErrorCode != 0 || resp.MemberEpoch != 1 || resp.Assignment == nil || len(resp.Assignment.Topics) != 1 || resp.HeartbeatIntervalMillis != 100 {
		t.Fatalf("join: %+v", resp)
	}
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch, r.Topics = 5, nil }); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %d", r.ErrorCode)
	}

	// OffsetCommit v9 checks the member's epoch.
	commit := func(epoch int32) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = "g", "m1", epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(1); code != 0 {
		t.Fatalf("commit with the member epoch: %d", code)
	}
	if code := commit(7); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit with another epoch: %d", code)
	}
	// OffsetFetch v9 as the member, then with a stale epoch.
	fetch := func(epoch int32) (int16, int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = "g", str("m1"), epoch
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		g := resp.Groups[0]
		if len(g.Topics) == 0 {
			return g.ErrorCode, -1
		}
		return g.ErrorCode, g.Topics[0].Partitions[0].Offset
	}
	if code, off := fetch(1); code != 0 || off != 1 {
		t.Fatalf("fetch as the member: %d %d", code, off)
	}
	if code, _ := fetch(2); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("fetch with a stale epoch: %d", code)
	}

	// A member of another protocol type cannot join the consumer group
	// (classic consumers can: TestConsumerGroup848Migration).
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "connect", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "default", Metadata: []byte{0}}}
	jr, err := join.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if jr.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("connect JoinGroup to a consumer group: %d", jr.ErrorCode)
	}

	// ConsumerGroupDescribe of a classic group is GROUP_ID_NOT_FOUND.
	classic := startMember(t, addr, "classic", "t", "c")
	waitUntil(t, 15*time.Second, "the classic member has partitions", func() (bool, string) { return len(classic.partitions()) == 2, "" })
	if d := describe848(t, adm, "classic"); !errors.Is(d.Err, kerr.GroupIDNotFound) {
		t.Fatalf("ConsumerGroupDescribe of a classic group: %v", d.Err)
	}
	// A heartbeat that is not a join does not convert a classic group.
	if r := hb(func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group, r.MemberEpoch = "classic", 1 }); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat to a non-empty classic group: %d", r.ErrorCode)
	}
}

// TestConsumerGroup848Migration: Apache 4.0's online migration with real
// franz-go members. Two classic (cooperative-sticky) members share a
// classic group; a consumer protocol member joining converts it to a
// consumer group in which the classic members keep consuming through
// JoinGroup/SyncGroup, assigned by the broker; when the consumer protocol
// member leaves, the group is a classic group again. No record is lost
// and no partition is ever owned twice at the end of a step.
func TestConsumerGroup848Migration(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), consumerGroupTimings)
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "mig", 6)
	for p := int32(0); p < 6; p++ {
		produce(t, addr, "mig", p, 10)
	}
	a := startMember(t, addr, "mig", "mig", "a")
	bm := startMember(t, addr, "mig", "mig", "b")
	waitUntil(t, 15*time.Second, "two classic members split six partitions", func() (bool, string) { return balanced(6, a, bm) })
	// kaas_groups follows the group from one type to the other.
	gauges := func(want map[string]float64) func() (bool, string) {
		return func() (bool, string) {
			got := map[string]float64{}
			for typ, states := range map[string][]string{"classic": {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}, "consumer": {"Empty", "Assigning", "Reconciling", "Stable"}} {
				for _, s := range states {
					if v := groupGauge(b, typ, s); v != 0 {
						got[typ+"/"+s] = v
					}
				}
			}
			return maps.Equal(got, want), fmt.Sprint(got)
		}
	}
	waitUntil(t, 15*time.Second, "kaas_groups: one classic group, Stable", gauges(map[string]float64{"classic/Stable": 1}))

	c := start848Member(t, addr, "mig", "mig", "c")
	waitUntil(t, 20*time.Second, "the upgraded group splits six partitions in three", func() (bool, string) { return balanced(6, a, bm, c) })
	d := describe848(t, adm, "mig")
	classic := 0
	for _, m := range d.Members {
		if m.MemberType == 0 {
			classic++
		}
	}
	if d.Err != nil || len(d.Members) != 3 || classic != 2 {
		t.Fatalf("described after the upgrade (%d classic): %+v", classic, d)
	}
	waitUntil(t, 15*time.Second, "kaas_groups: one consumer group, Stable", gauges(map[string]float64{"consumer/Stable": 1}))
	waitUntil(t, 15*time.Second, "every record consumed", func() (bool, string) {
		return len(a.consumed())+len(bm.consumed())+len(c.consumed()) >= 60, ""
	})

	c.close()
	waitUntil(t, 20*time.Second, "the downgraded classic group splits six partitions in two", func() (bool, string) { return balanced(6, a, bm) })
	groups, err := adm.DescribeGroups(context.Background(), "mig")
	if err != nil {
		t.Fatal(err)
	}
	if g := groups["mig"]; g.State != "Stable" || len(g.Members) != 2 || g.ProtocolType != "consumer" {
		t.Fatalf("DescribeGroups after the downgrade: %+v", g)
	}
	waitUntil(t, 15*time.Second, "kaas_groups: one classic group again, Stable", gauges(map[string]float64{"classic/Stable": 1}))
}

// TestConsumerGroup848RestartResumes: a consumer group's members,
// epochs and assignments survive a broker restart; its members carry on
// heartbeating at their epochs, with no new group epoch and no partition
// moving.
func TestConsumerGroup848RestartResumes(t *testing.T) {
	dir := t.TempDir()
	addr := loopback.FreeAddr(t)
	fixed := func(c *Config) {
		consumerGroupTimings(c)
		c.Listen = addr
		c.ConsumerSessionTimeout = 20 * time.Second // survives the restart
	}
	b := startGroupBroker(t, dir, fixed)
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "r", 4)
	a := start848Member(t, addr, "restart", "r", "a")
	bm := start848Member(t, addr, "restart", "r", "b")
	waitUntil(t, 15*time.Second, "two members split four partitions", func() (bool, string) { return balanced(4, a, bm) })
	before := describe848(t, adm, "restart")
	if before.State != "Stable" {
		t.Fatalf("before: %+v", before)
	}
	pa, pb := a.partitions(), bm.partitions()

	closeBroker(t, b)
	b2 := startGroupBroker(t, dir, fixed)
	_ = b2
	var after kadm.DescribedConsumerGroup
	waitUntil(t, 15*time.Second, "the group is Stable again", func() (bool, string) {
		after = describe848(t, adm, "restart")
		return after.Err == nil && after.State == "Stable" && len(after.Members) == 2, after.State
	})
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch {
		t.Fatalf("epochs %d/%d after restart, were %d/%d", after.Epoch, after.AssignmentEpoch, before.Epoch, before.AssignmentEpoch)
	}
	for i, m := range after.Members {
		if m.MemberID != before.Members[i].MemberID || m.MemberEpoch != before.Members[i].MemberEpoch {
			t.Fatalf("member %d: %s@%d, was %s@%d", i, m.MemberID, m.MemberEpoch, before.Members[i].MemberID, before.Members[i].MemberEpoch)
		}
	}
	// Heartbeats flow (ten intervals) and nothing moves.
	time.Sleep(time.Second)
	if got := describe848(t, adm, "restart"); got.Epoch != before.Epoch {
		t.Fatalf("epoch moved to %d after the restart", got.Epoch)
	}
	if ok, _ := balanced(4, a, bm); !ok || !slices.Equal(a.partitions(), pa) || !slices.Equal(bm.partitions(), pb) {
		t.Fatalf("partitions moved: a %v→%v b %v→%v", pa, a.partitions(), pb, bm.partitions())
	}
}
