package broker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupSplitsAndTakesOver runs franz-go consumers (cooperative-sticky,
// the default) against the broker: two members split six partitions, a
// third joins and all three split them, one leaves and the remaining two
// take its partitions over within the session timeout.
func TestGroupSplitsAndTakesOver(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "orders", 6)

	a := startMember(t, addr, "g1", "orders", "a")
	bm := startMember(t, addr, "g1", "orders", "b")
	waitUntil(t, 15*time.Second, "two members split six partitions", func() (bool, string) { return balanced(6, a, bm) })

	c := startMember(t, addr, "g1", "orders", "c")
	waitUntil(t, 15*time.Second, "three members split six partitions", func() (bool, string) { return balanced(6, a, bm, c) })

	const sessionTimeout = 3 * time.Second
	left := time.Now()
	c.close()
	waitUntil(t, sessionTimeout, "the two remaining members take over", func() (bool, string) { return balanced(6, a, bm) })
	t.Logf("takeover after LeaveGroup: %v", time.Since(left))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	groups, err := adm.DescribeGroups(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	g := groups["g1"]
	if g.State != "Stable" || len(g.Members) != 2 || g.Protocol != "cooperative-sticky" || g.ProtocolType != "consumer" {
		t.Fatalf("described group: state %s protocol %s/%s members %d", g.State, g.ProtocolType, g.Protocol, len(g.Members))
	}
	if n := testutil.ToFloat64(b.Metrics().Rebalances); n < 3 {
		t.Fatalf("kaas_group_rebalances_total = %v after three membership changes", n)
	}
}

// TestGroupConsumesEveryRecord: members of one group together consume
// each produced record exactly once (no partition is read by two members
// at once in a stable group).
func TestGroupConsumesEveryRecord(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), nil)
	addr := b.Addr()
	adm := newAdmin(t, addr)
	createGroupTopic(t, adm, "events", 4)
	for p := int32(0); p < 4; p++ {
		produce(t, addr, "events", p, 25)
	}
	a := startMember(t, addr, "g2", "events", "a", kgo.DisableAutoCommit())
	bm := startMember(t, addr, "g2", "events", "b", kgo.DisableAutoCommit())
	waitUntil(t, 15*time.Second, "all 100 records consumed", func() (bool, string) {
		n := len(a.consumed()) + len(bm.consumed())
		return n >= 100, ""
	})
}
