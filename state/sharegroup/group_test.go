package sharegroup

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"kaas/model"
	"kaas/state/sharepartition"
)

type fakeTopics map[string]int32

func (f fakeTopics) ByName(name string) (TopicID, int32, bool) {
	n, ok := f[name]
	return TopicID{name[0]}, n, ok
}

func hb(member string, epoch int32, subs ...string) HeartbeatRequest {
	return HeartbeatRequest{Group: "g", MemberID: member, Epoch: epoch, Subscribed: subs}
}

func TestHeartbeatEpochsAndErrors(t *testing.T) {
	now := time.Unix(0, 0)
	topics := fakeTopics{"t": 2}
	c := New(Defaults(), topics)
	for _, tc := range []struct {
		name string
		req  HeartbeatRequest
		code int16
		want int32 // epoch
	}{
		{"heartbeat before the group exists", hb("a", 1), kerr.GroupIDNotFound.Code, 0},
		{"a joins", hb("a", 0, "t"), 0, 1},
		{"b joins: the group epoch rises", hb("b", 0, "t"), 0, 2},
		{"a heartbeats its old epoch: moves to 2", hb("a", 1), 0, 2},
		{"a with the epoch before (lost answer) is accepted", hb("a", 1), 0, 2},
		{"a with an epoch it never had is fenced", hb("a", 7), kerr.FencedMemberEpoch.Code, 0},
		{"an unknown member", hb("z", 3), kerr.UnknownMemberID.Code, 0},
		{"unknown member leaving", hb("z", -1), kerr.UnknownMemberID.Code, 0},
		{"b leaves", hb("b", -1), 0, -1},
		{"a gets the whole topic at epoch 3", hb("a", 2), 0, 3},
	} {
		res := c.Heartbeat(tc.req, now)
		if res.Code != tc.code || (tc.code == 0 && res.Epoch != tc.want) {
			t.Fatalf("%s: code %v epoch %d, want %v %d", tc.name, kerr.ErrorForCode(res.Code), res.Epoch, kerr.ErrorForCode(tc.code), tc.want)
		}
	}
	if got := c.Group("g").Members["a"].Assignment[TopicID{'t'}]; len(got) != 2 {
		t.Fatalf("a's assignment %v", got)
	}
	for _, bad := range []HeartbeatRequest{hb("", 0, "t"), hb("a", -2), hb("a", 0), {Group: " ", MemberID: "a", Subscribed: []string{"t"}}} {
		if code, _ := Validate(bad); code != kerr.InvalidRequest.Code {
			t.Fatalf("%+v: %v", bad, code)
		}
	}
}

func TestSimpleAssignorShares(t *testing.T) {
	now := time.Unix(0, 0)
	c := New(Defaults(), fakeTopics{"t": 2})
	for _, m := range []string{"a", "b", "c"} {
		c.Heartbeat(hb(m, 0, "t"), now)
	}
	for _, m := range []string{"a", "b", "c"} {
		c.Heartbeat(hb(m, c.Group("g").Members[m].Epoch), now)
	}
	covered := map[int32]int{}
	for _, m := range c.Group("g").Members {
		for _, p := range m.Assignment[TopicID{'t'}] {
			covered[p]++
		}
		if len(m.Assignment[TopicID{'t'}]) != 1 {
			t.Fatalf("%s: %v", m.ID, m.Assignment)
		}
	}
	if covered[0] != 2 || covered[1] != 1 {
		t.Fatalf("coverage %v", covered)
	}
}

func TestSessionTimeoutFencesAndReleases(t *testing.T) {
	now := time.Unix(0, 0)
	cfg := Defaults()
	cfg.Partition.LockDuration = time.Hour
	c := New(cfg, fakeTopics{"t": 1})
	c.Heartbeat(hb("a", 0, "t"), now)
	g := c.Group("g")
	tp := model.TopicIDPartition{Topic: TopicID{'t'}, Partition: 0}
	p := g.Partition(cfg.Partition, tp, func() int64 { return 0 })
	if _, code := c.OpenSession(SessionRequest{Group: "g", Member: "a", Add: []model.TopicIDPartition{tp}}, now); code != 0 {
		t.Fatal(code)
	}
	if got := p.Acquire("a", []sharepartition.Batch{{First: 0, Last: 0}}, sharepartition.Want{MaxRecords: 10}, now); len(got) != 1 {
		t.Fatal(got)
	}
	if d, ok := c.NextDeadline(); !ok || !d.Equal(now.Add(cfg.SessionTimeout)) {
		t.Fatal(d, ok)
	}
	if c.Expire(now.Add(cfg.SessionTimeout - time.Millisecond)); len(g.Members) != 1 {
		t.Fatal("fenced early")
	}
	c.Expire(now.Add(cfg.SessionTimeout))
	if len(g.Members) != 0 || g.Session("a") != nil || c.Sessions() != 0 {
		t.Fatal("not fenced")
	}
	if _, acquired, _ := p.Counts(); acquired != 0 {
		t.Fatal("the fenced member's records are still held")
	}
	if res := c.Heartbeat(hb("a", 1), now); res.Code != kerr.UnknownMemberID.Code {
		t.Fatal(res.Code)
	}
}

func TestSessions(t *testing.T) {
	now := time.Unix(0, 0)
	c := New(Defaults(), fakeTopics{"t": 1})
	tp := model.TopicIDPartition{Topic: TopicID{'t'}, Partition: 0}
	open := func(epoch int32, ack, hasAcks bool) int16 {
		_, code := c.OpenSession(SessionRequest{Group: "g", Member: "a", Epoch: epoch, Add: []model.TopicIDPartition{tp}, Acknowledge: ack, HasAcks: hasAcks}, now)
		return code
	}
	steps := []struct {
		name      string
		epoch     int32
		ack, acks bool
		code      int16
	}{
		{"incremental before any session", 1, false, false, kerr.ShareSessionNotFound.Code},
		{"open with acks", 0, false, true, kerr.InvalidRequest.Code},
		{"acknowledge cannot open", 0, true, false, kerr.InvalidShareSessionEpoch.Code},
		{"open", 0, false, false, 0},
		{"epoch 1", 1, false, true, 0},
		{"epoch 1 again", 1, true, true, kerr.InvalidShareSessionEpoch.Code},
		{"epoch 3, skipping", 3, false, false, kerr.InvalidShareSessionEpoch.Code},
		{"epoch 2 by acknowledge", 2, true, true, 0},
		{"reopen replaces", 0, false, false, 0},
		{"old epoch after reopen", 3, false, false, kerr.InvalidShareSessionEpoch.Code},
		{"epoch 1 of the new one", 1, false, false, 0},
	}
	for _, s := range steps {
		if code := open(s.epoch, s.ack, s.acks); code != s.code {
			t.Fatalf("%s: %v, want %v", s.name, kerr.ErrorForCode(code), kerr.ErrorForCode(s.code))
		}
	}
	if c.Sessions() != 1 {
		t.Fatal(c.Sessions())
	}
	c.CloseSession("g", "a", now)
	if c.Sessions() != 0 || open(2, false, false) != kerr.ShareSessionNotFound.Code {
		t.Fatal("close")
	}
}

// A group's own configuration replaces the broker's for its heartbeats
// and its share-partitions, existing ones included; DeleteGroup needs an
// empty group and returns its share-partitions.
func TestGroupConfigsAndDelete(t *testing.T) {
	now := time.Unix(0, 0)
	c := New(Defaults(), fakeTopics{"t": 1})
	if r := c.Heartbeat(hb("a", 0, "t"), now); r.Code != 0 || r.Interval != 5*time.Second {
		t.Fatalf("%+v", r)
	}
	tp := model.TopicIDPartition{Topic: TopicID{'t'}, Partition: 0}
	p := c.Group("g").Partition(c.ConfigFor("g").Partition, tp, func() int64 { return 0 })
	own := Defaults()
	own.HeartbeatInterval, own.Partition.DeliveryLimit = time.Second, 2
	c.SetGroupConfigs(map[string]Config{"g": own})
	if r := c.Heartbeat(hb("a", 1), now); r.Interval != time.Second {
		t.Fatalf("interval %v", r.Interval)
	}
	if p.Config().DeliveryLimit != 2 || c.ConfigFor("other").Partition.DeliveryLimit != 5 {
		t.Fatalf("partition config %+v", p.Config())
	}
	if _, code := c.DeleteGroup("g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %d", code)
	}
	c.Heartbeat(hb("a", -1), now)
	tps, code := c.DeleteGroup("g")
	if code != 0 || len(tps) != 1 || tps[0] != tp || c.Group("g") != nil {
		t.Fatalf("delete: %v %d", tps, code)
	}
	if _, code := c.DeleteGroup("g"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete again: %d", code)
	}
}

func TestDropPartitionAndUnloadMembers(t *testing.T) {
	now := time.Unix(0, 0)
	c := New(Defaults(), fakeTopics{"t": 2})
	if res := c.Heartbeat(hb("m1", 0, "t"), now); res.Code != 0 {
		t.Fatalf("join: %+v", res)
	}
	tp0 := model.TopicIDPartition{Topic: TopicID{'t'}, Partition: 0}
	c.Restore("g", tp0, sharepartition.New(0, c.Config().Partition))
	c.Restore("other", tp0, sharepartition.New(0, c.Config().Partition))

	// The partition moved: its share-partitions go, groups left with
	// nothing go too; the members stay.
	c.DropPartition(tp0)
	if g := c.Group("g"); g == nil || len(g.Partitions) != 0 || len(g.Members) != 1 {
		t.Fatalf("after DropPartition, g = %+v", g)
	}
	if c.Group("other") != nil {
		t.Fatalf("a group with nothing left here stayed")
	}

	// The slot moved: members go, the member's next heartbeat here is
	// UNKNOWN_MEMBER_ID (it finds the new coordinator).
	c.Restore("g", tp0, sharepartition.New(0, c.Config().Partition))
	c.UnloadMembers(func(id string) bool { return id == "g" })
	if g := c.Group("g"); g == nil || len(g.Members) != 0 || len(g.Partitions) != 1 {
		t.Fatalf("after UnloadMembers, g = %+v", g)
	}
	c.DropPartition(tp0)
	if c.Group("g") != nil {
		t.Fatalf("an empty group stayed")
	}
}
