package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/state/consumergroup"
)

// TestGroupAPIVersions: the group APIs advertise from Apache 3.7's oldest
// versions to the newest kmsg decodes (DescribeGroups v6 and ListGroups
// v5 of KIP-1043/KIP-848; TxnOffsetCommit stops before transaction
// version 2's v5).
func TestGroupAPIVersions(t *testing.T) {
	want := map[int16][2]int16{8: {0, 9}, 9: {0, 9}, 11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5}, 15: {0, 6}, 16: {0, 5}, 28: {0, 5}, 42: {0, 3}, 47: {0, 0}}
	b := startGroupBroker(t, t.TempDir(), nil)
	r := newRawGroupClient(t, b)
	resp := r.request(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		if _, ok := want[k.ApiKey]; ok {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("advertised %v, want %v", got, want)
	}
}

// TestGroupRequestErrors checks the codes group requests answer before
// any rebalance logic (Apache's validateGroupStatus, the session timeout
// bounds, groups that do not exist, version-specific fields), each at a
// pinned version.
func TestGroupRequestErrors(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	createGroupTopic(t, newAdmin(t, b.Addr()), "a", 1)
	r := newRawGroupClient(t, b)

	join := func(group, member string, sessionMs int32) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis, req.ProtocolType = group, member, sessionMs, 5000, "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		md := kmsg.NewConsumerMemberMetadata()
		p.Name, p.Metadata = "range", md.AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		return req
	}
	offsetCommit := func(group string, generation int32, topic string) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, generation
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}

	for _, tc := range []struct {
		name    string
		version int16
		req     kmsg.Request
		check   func(kmsg.Response) error
	}{
		{"JoinGroup empty group id", 9, join("", "", 1000), joinCode(kerr.InvalidGroupID.Code, "")},
		{"JoinGroup session timeout below the minimum", 9, join("g", "", 10), joinCode(kerr.InvalidSessionTimeout.Code, "")},
		{"JoinGroup session timeout above the maximum", 9, join("g", "", 31*60*1000), joinCode(kerr.InvalidSessionTimeout.Code, "")},
		{"JoinGroup known member of a missing group", 9, join("nope", "m-1", 1000), joinCode(kerr.UnknownMemberID.Code, "m-1")},
		{"JoinGroup v4 first join (KIP-394)", 4, join("fresh", "", 1000), func(resp kmsg.Response) error {
			jr := resp.(*kmsg.JoinGroupResponse)
			if jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" || jr.Generation != -1 {
				return fmt.Errorf("%v member %q generation %d", kerr.ErrorForCode(jr.ErrorCode), jr.MemberID, jr.Generation)
			}
			return nil
		}},
		{"JoinGroup v6 error has an empty protocol name", 6, join("nope", "m-1", 1000), func(resp kmsg.Response) error {
			if p := resp.(*kmsg.JoinGroupResponse).Protocol; p == nil || *p != "" {
				return fmt.Errorf("protocol %v", p)
			}
			return nil
		}},
		{"JoinGroup v7 error has a null protocol name", 7, join("nope", "m-1", 1000), func(resp kmsg.Response) error {
			if p := resp.(*kmsg.JoinGroupResponse).Protocol; p != nil {
				return fmt.Errorf("protocol %q", *p)
			}
			return nil
		}},
		{"SyncGroup v5 without protocol type", 5, func() kmsg.Request {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Group, req.MemberID, req.Protocol = "g", "m", kmsg.StringPtr("range")
			return req
		}(), syncCode(kerr.InconsistentGroupProtocol.Code)},
		{"SyncGroup missing group", 4, func() kmsg.Request {
			req := kmsg.NewPtrSyncGroupRequest()
			req.Group, req.MemberID = "nope", "m"
			return req
		}(), syncCode(kerr.UnknownMemberID.Code)},
		{"Heartbeat missing group", 4, func() kmsg.Request {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Group, req.MemberID = "nope", "m"
			return req
		}(), heartbeatCode(kerr.UnknownMemberID.Code)},
		{"Heartbeat empty group id", 4, func() kmsg.Request {
			req := kmsg.NewPtrHeartbeatRequest()
			req.MemberID = "m"
			return req
		}(), heartbeatCode(kerr.InvalidGroupID.Code)},
		{"LeaveGroup v1 missing group", 1, func() kmsg.Request {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group, req.MemberID = "nope", "m"
			return req
		}(), func(resp kmsg.Response) error {
			if c := resp.(*kmsg.LeaveGroupResponse).ErrorCode; c != kerr.UnknownMemberID.Code {
				return fmt.Errorf("%v", kerr.ErrorForCode(c))
			}
			return nil
		}},
		{"LeaveGroup v5 missing group answers per member", 5, func() kmsg.Request {
			req := kmsg.NewPtrLeaveGroupRequest()
			req.Group = "nope"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "m"
			req.Members = append(req.Members, m)
			return req
		}(), func(resp kmsg.Response) error {
			lr := resp.(*kmsg.LeaveGroupResponse)
			if lr.ErrorCode != 0 || len(lr.Members) != 1 || lr.Members[0].ErrorCode != kerr.UnknownMemberID.Code || lr.Members[0].MemberID != "m" {
				return fmt.Errorf("%+v", lr)
			}
			return nil
		}},
		{"OffsetCommit unknown topic", 8, offsetCommit("g", -1, "nosuchtopic"), commitCode(kerr.UnknownTopicOrPartition.Code)},
		{"OffsetCommit generation for a missing group", 8, offsetCommit("nope", 5, "a"), commitCode(kerr.IllegalGeneration.Code)},
		{"OffsetFetch v1 missing group", 1, func() kmsg.Request {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = "nope"
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "a", []int32{0}
			req.Topics = append(req.Topics, rt)
			return req
		}(), func(resp kmsg.Response) error {
			fr := resp.(*kmsg.OffsetFetchResponse)
			if len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].Offset != -1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
				return fmt.Errorf("%+v", fr)
			}
			return nil
		}},
		{"OffsetDelete empty group id", 0, func() kmsg.Request {
			return kmsg.NewPtrOffsetDeleteRequest()
		}(), func(resp kmsg.Response) error {
			if c := resp.(*kmsg.OffsetDeleteResponse).ErrorCode; c != kerr.InvalidGroupID.Code {
				return fmt.Errorf("%v", kerr.ErrorForCode(c))
			}
			return nil
		}},
		{"TxnOffsetCommit empty group id", 3, func() kmsg.Request {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.TransactionalID = "t"
			for _, topic := range []string{"a", "nosuchtopic"} {
				rt := kmsg.NewTxnOffsetCommitRequestTopic()
				rt.Topic = topic
				rt.Partitions = append(rt.Partitions, kmsg.NewTxnOffsetCommitRequestTopicPartition())
				req.Topics = append(req.Topics, rt)
			}
			return req
		}(), func(resp kmsg.Response) error {
			tr := resp.(*kmsg.TxnOffsetCommitResponse)
			if tr.Topics[0].Partitions[0].ErrorCode != kerr.InvalidGroupID.Code || tr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				return fmt.Errorf("%+v", tr)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.t = t
			resp := r.pinned(tc.req, tc.version)
			if err := tc.check(resp); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func joinCode(code int16, member string) func(kmsg.Response) error {
	return func(resp kmsg.Response) error {
		jr := resp.(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != code || jr.MemberID != member || jr.Generation != -1 {
			return fmt.Errorf("%v member %q generation %d", kerr.ErrorForCode(jr.ErrorCode), jr.MemberID, jr.Generation)
		}
		return nil
	}
}

func syncCode(code int16) func(kmsg.Response) error {
	return func(resp kmsg.Response) error {
		if c := resp.(*kmsg.SyncGroupResponse).ErrorCode; c != code {
			return fmt.Errorf("%v", kerr.ErrorForCode(c))
		}
		return nil
	}
}

func heartbeatCode(code int16) func(kmsg.Response) error {
	return func(resp kmsg.Response) error {
		if c := resp.(*kmsg.HeartbeatResponse).ErrorCode; c != code {
			return fmt.Errorf("%v", kerr.ErrorForCode(c))
		}
		return nil
	}
}

func commitCode(code int16) func(kmsg.Response) error {
	return func(resp kmsg.Response) error {
		if c := resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != code {
			return fmt.Errorf("%v", kerr.ErrorForCode(c))
		}
		return nil
	}
}

// TestSilentMemberExpires: a member that joins and then goes silent is
// removed once its session timeout passes (a timer message to the group
// actor), and a franz-go member that joined meanwhile ends up alone with
// every partition.
func TestSilentMemberExpires(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	createGroupTopic(t, newAdmin(t, b.Addr()), "a", 3)
	r := newRawGroupClient(t, b)
	zombie, gen := r.joinAndSync("quiet", 500)
	if gen != 1 {
		t.Fatalf("generation %d", gen)
	}
	m := startMember(t, b.Addr(), "quiet", "a", "alive")
	start := time.Now()
	waitUntil(t, 5*time.Second, "the live member owns every partition", func() (bool, string) { return balanced(3, m) })
	t.Logf("silent member expired and the group rebalanced in %v", time.Since(start))
	s := groupSummary(t, b, "quiet")
	if len(s.Members) != 1 || s.Members[0].MemberID == zombie || s.State != "Stable" {
		t.Fatalf("group after expiry: %+v", s)
	}
	// The expired member is told so.
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "quiet", zombie, gen
	if c := r.request(hb).(*kmsg.HeartbeatResponse).ErrorCode; c != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of the expired member: %v", kerr.ErrorForCode(c))
	}
}

// TestGroupMetricsAndInspector: kaas_groups counts groups by type and state, the
// offsets commit counter moves, and the inspector sees each group actor's
// summary (state, generation, protocol, leader, members).
func TestGroupMetricsAndInspector(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "a", 2)
	m := startMember(t, b.Addr(), "watched", "a", "w")
	waitUntil(t, 10*time.Second, "stable", func() (bool, string) { return balanced(2, m) })
	gauge := func(state string) float64 { return groupGauge(b, "classic", state) }
	waitUntil(t, 5*time.Second, "kaas_groups{type=classic,state=Stable} = 1", func() (bool, string) {
		return gauge("Stable") == 1, fmt.Sprint(gauge("Stable"))
	})
	info, ok := b.Actors().Lookup("group/watched")
	if !ok {
		t.Fatal("no group/watched actor")
	}
	s, ok := info.State(info.PID).(*consumergroup.Summary)
	if !ok || s.State != "Stable" || s.Generation < 1 || s.Protocol != "cooperative-sticky" || len(s.Members) != 1 || s.Leader != s.Members[0].MemberID || s.Members[0].AssignmentBytes == 0 {
		t.Fatalf("inspector summary %+v", s)
	}
	if _, ok := b.Actors().Lookup("offsets/log"); !ok {
		t.Fatal("no offsets/log actor")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(b.Metrics().OffsetCommits)
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "a", Partition: 0, At: 1, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: "a", Partition: 1, At: 1, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "other", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if got := testutil.ToFloat64(b.Metrics().OffsetCommits) - before; got != 2 {
		t.Fatalf("kaas_offset_commits_total grew by %v, want 2", got)
	}
	m.close()
	waitUntil(t, 5*time.Second, "the group is Empty", func() (bool, string) {
		return gauge("Stable") == 0 && gauge("Empty") == 2, fmt.Sprint(gauge("Stable"), gauge("Empty"))
	})
	if _, err := adm.DeleteGroups(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the deleted group leaves the gauge", func() (bool, string) {
		return gauge("Empty") == 1 && gauge("Dead") == 0, fmt.Sprint(gauge("Empty"), gauge("Dead"))
	})
}
