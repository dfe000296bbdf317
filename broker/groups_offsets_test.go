package broker

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCommittedOffsetsSurviveRestart: a consumer commits, the broker
// restarts on the same data directory, and a new member of the group
// resumes from the committed offsets (it would re-read everything from the
// start if they were lost).
func TestCommittedOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startGroupBroker(t, dir, nil)
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "logs", 3)
	for p := int32(0); p < 3; p++ {
		produce(t, b.Addr(), "logs", p, 10)
	}
	m := startMember(t, b.Addr(), "resume", "logs", "first", kgo.DisableAutoCommit())
	waitUntil(t, 15*time.Second, "30 records consumed", func() (bool, string) {
		return len(m.consumed()) == 30, fmt.Sprint(len(m.consumed()))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	m.close()
	closeBroker(t, b)

	b = startGroupBroker(t, dir, nil)
	adm = newAdmin(t, b.Addr())
	offs, err := adm.FetchOffsets(ctx, "resume")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 3; p++ {
		o, ok := offs.Lookup("logs", p)
		if !ok || o.At != 10 || o.Err != nil {
			t.Fatalf("partition %d after restart: %+v (found %v)", p, o, ok)
		}
	}
	described, err := adm.DescribeGroups(ctx, "resume")
	if err != nil || described["resume"].State != "Empty" || described["resume"].ProtocolType != "consumer" {
		t.Fatalf("group after restart: %+v %v", described["resume"], err)
	}
	for p := int32(0); p < 3; p++ {
		produce(t, b.Addr(), "logs", p, 5)
	}
	m = startMember(t, b.Addr(), "resume", "logs", "second", kgo.DisableAutoCommit())
	waitUntil(t, 15*time.Second, "the 15 new records consumed", func() (bool, string) {
		return len(m.consumed()) >= 15, fmt.Sprint(len(m.consumed()))
	})
	// Each partition is read in order, so had the committed offsets been
	// lost the first records would be offsets 0–9.
	for _, r := range m.consumed() {
		if r.Offset < 10 {
			t.Fatalf("re-read %s-%d@%d: committed offsets were not used", r.Topic, r.Partition, r.Offset)
		}
	}
	if n := len(m.consumed()); n != 15 {
		t.Fatalf("consumed %d records after restart, want 15", n)
	}
}

// TestStaticMemberRestartsWithoutRebalance is KIP-345 through franz-go: a
// static member that restarts (franz-go sends no LeaveGroup for it) gets
// its partitions back with no rebalance, and the other member keeps its
// partitions throughout.
func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "static", 4)
	a := startMember(t, b.Addr(), "sg", "static", "a", kgo.InstanceID("inst-a"))
	bm := startMember(t, b.Addr(), "sg", "static", "b", kgo.InstanceID("inst-b"))
	waitUntil(t, 15*time.Second, "two static members split four partitions", func() (bool, string) { return balanced(4, a, bm) })

	// Restart the member that is not the leader (a restarting static
	// leader is handed SkipAssignment, and franz-go may then choose to
	// rebalance on its own).
	follower, other, inst, name := a, bm, "inst-a", "a2"
	if leader := groupSummary(t, b, "sg").Leader; len(leader) > 7 && leader[:7] == "inst-a-" {
		follower, other, inst, name = bm, a, "inst-b", "b2"
	}
	before := follower.partitions()
	otherBefore := other.partitions()
	rebalances := testutil.ToFloat64(b.Metrics().Rebalances)
	generation := groupSummary(t, b, "sg").Generation
	follower.close()

	restarted := startMember(t, b.Addr(), "sg", "static", name, kgo.InstanceID(inst))
	waitUntil(t, 10*time.Second, "the restarted member owns its old partitions", func() (bool, string) {
		return fmt.Sprint(restarted.partitions()) == fmt.Sprint(before), fmt.Sprint(restarted.partitions(), " want ", before)
	})
	if got := testutil.ToFloat64(b.Metrics().Rebalances); got != rebalances {
		t.Fatalf("static member restart caused %v rebalances", got-rebalances)
	}
	s := groupSummary(t, b, "sg")
	if s.Generation != generation || s.State != "Stable" || len(s.Members) != 2 {
		t.Fatalf("group after restart: generation %d (was %d), state %s, %d members", s.Generation, generation, s.State, len(s.Members))
	}
	if fmt.Sprint(other.partitions()) != fmt.Sprint(otherBefore) {
		t.Fatalf("the other member's partitions moved: %v → %v", otherBefore, other.partitions())
	}
}

// TestAdminGroupOperations drives kadm's ListGroups (with a state filter),
// DescribeGroups, OffsetDelete and DeleteGroups against live and empty
// groups.
func TestAdminGroupOperations(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "ta", 2)
	createGroupTopic(t, adm, "tb", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	live := startMember(t, b.Addr(), "live", "ta", "m")
	waitUntil(t, 10*time.Second, "the live group is stable", func() (bool, string) { return balanced(2, live) })

	// An offsets-only group (no members), committed through kadm.
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "ta", Partition: 0, At: 7, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: "tb", Partition: 0, At: 3, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "idle", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	// Offsets for the live group's unsubscribed topic tb and subscribed ta.
	liveCommit := kadm.Offsets{}
	liveCommit.Add(kadm.Offset{Topic: "tb", Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "live", liveCommit); err != nil || resp.Error() == nil {
		t.Fatalf("a commit without membership to a live group should fail: %v %v", err, resp.Error())
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedKeys(listed); fmt.Sprint(got) != "[idle live]" {
		t.Fatalf("listed %v", got)
	}
	stable, err := adm.ListGroups(ctx, "Stable")
	if err != nil || fmt.Sprint(sortedKeys(stable)) != "[live]" {
		t.Fatalf("listed Stable: %v %v", sortedKeys(stable), err)
	}
	if listed["idle"].State != "Empty" || listed["idle"].ProtocolType != "" {
		t.Fatalf("idle listed as %+v", listed["idle"])
	}

	described, err := adm.DescribeGroups(ctx, "live", "idle", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["live"]; d.State != "Stable" || len(d.Members) != 1 || d.Members[0].ClientID != "m" || d.Members[0].ClientHost != "/127.0.0.1" {
		t.Fatalf("live described as %+v", d)
	}
	if a, ok := described["live"].Members[0].Assigned.AsConsumer(); !ok || len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 2 {
		t.Fatalf("live member assignment %+v", described["live"].Members[0].Assigned)
	}
	if described["nope"].State != "Dead" || described["idle"].State != "Empty" {
		t.Fatalf("nope %s idle %s", described["nope"].State, described["idle"].State)
	}

	// OffsetDelete: the live consumer group keeps its subscribed topic.
	del := kadm.TopicsSet{}
	del.Add("ta", 0)
	del.Add("tb", 0)
	resps, err := adm.DeleteOffsets(ctx, "live", del)
	if err != nil {
		t.Fatal(err)
	}
	if e := resps["ta"][0]; e != kerr.GroupSubscribedToTopic {
		t.Fatalf("deleting a subscribed topic's offset: %v", e)
	}
	if e := resps["tb"][0]; e != nil {
		t.Fatalf("deleting an unsubscribed topic's offset: %v", e)
	}
	resps, err = adm.DeleteOffsets(ctx, "idle", del)
	if err != nil || resps.Error() != nil {
		t.Fatalf("deleting idle offsets: %v %v", err, resps.Error())
	}
	if _, err := adm.DeleteOffsets(ctx, "nope", del); err != kerr.GroupIDNotFound {
		t.Fatalf("deleting offsets of a missing group: %v", err)
	}

	// DeleteGroups: a live group cannot go; an empty one can, with its
	// offsets; a missing one is not found.
	commit = kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "ta", Partition: 1, At: 9, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "doomed", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	dg, err := adm.DeleteGroups(ctx, "live", "doomed", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if dg["live"].Err != kerr.NonEmptyGroup || dg["doomed"].Err != nil || dg["nope"].Err != kerr.GroupIDNotFound {
		t.Fatalf("delete groups: live %v doomed %v nope %v", dg["live"].Err, dg["doomed"].Err, dg["nope"].Err)
	}
	offs, err := adm.FetchOffsets(ctx, "doomed")
	if err != nil || len(offs) != 0 {
		t.Fatalf("offsets of a deleted group: %v %v", offs, err)
	}
	waitUntil(t, 5*time.Second, "the deleted group is gone from ListGroups", func() (bool, string) {
		l, err := adm.ListGroups(ctx)
		_, still := l["doomed"]
		return err == nil && !still, fmt.Sprint(sortedKeys(l))
	})
	// The id can be used again at once; so can the empty group id, which
	// OffsetCommit, OffsetFetch and DescribeGroups accept (Apache's
	// backwards compatibility).
	for _, id := range []string{"doomed", ""} {
		if resp, err := adm.CommitOffsets(ctx, id, commit); err != nil || resp.Error() != nil {
			t.Fatalf("commit to %q: %v %v", id, err, resp.Error())
		}
		offs, err := adm.FetchOffsets(ctx, id)
		if o, ok := offs.Lookup("ta", 1); err != nil || !ok || o.At != 9 {
			t.Fatalf("offsets of %q: %v %v", id, offs, err)
		}
	}
}

func sortedKeys(l kadm.ListedGroups) []string {
	var out []string
	for k := range l {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// groupSummary is the group's published summary (as the inspector sees it).
func groupSummary(t *testing.T, b *Broker, id string) groupsSummary {
	t.Helper()
	for _, h := range b.liveGroups() {
		if h.ID == id {
			return *h.Summary()
		}
	}
	t.Fatalf("group %s not found", id)
	return groupsSummary{}
}

// TestOffsetsExpireAndFollowTopicDeletion: offsets of an offsets-only
// group expire after offsets.retention.minutes (shrunk here) and the group
// goes away for good (its tombstones survive a restart); deleting a topic
// drops every group's offsets for it.
func TestOffsetsExpireAndFollowTopicDeletion(t *testing.T) {
	dir := t.TempDir()
	short := func(c *Config) {
		c.OffsetsRetention = 300 * time.Millisecond
		c.OffsetsRetentionCheckInterval = 50 * time.Millisecond
	}
	b := startGroupBroker(t, dir, short)
	adm := newAdmin(t, b.Addr())
	createGroupTopic(t, adm, "keep", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "keep", Partition: 0, At: 5, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "expiring", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	waitUntil(t, 5*time.Second, "expired offsets and group gone", func() (bool, string) {
		offs, err := adm.FetchOffsets(ctx, "expiring")
		l, lerr := adm.ListGroups(ctx)
		_, listed := l["expiring"]
		return err == nil && lerr == nil && len(offs) == 0 && !listed, fmt.Sprint(offs, sortedKeys(l))
	})
	closeBroker(t, b)
	b = startGroupBroker(t, dir, nil) // default retention: nothing would expire now
	adm = newAdmin(t, b.Addr())
	if offs, err := adm.FetchOffsets(ctx, "expiring"); err != nil || len(offs) != 0 {
		t.Fatalf("expired offsets came back after a restart: %v %v", offs, err)
	}

	createGroupTopic(t, adm, "gone", 2)
	commit = kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: "gone", Partition: 1, At: 3, LeaderEpoch: -1})
	commit.Add(kadm.Offset{Topic: "keep", Partition: 0, At: 4, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "td", commit); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the deleted topic's offsets are dropped", func() (bool, string) {
		offs, err := adm.FetchOffsets(ctx, "td")
		_, stillGone := offs.Lookup("gone", 1)
		kept, ok := offs.Lookup("keep", 0)
		return err == nil && !stillGone && ok && kept.At == 4, fmt.Sprint(offs)
	})
}
