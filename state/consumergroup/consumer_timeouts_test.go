package consumergroup

import (
	"testing"
	"time"
)

// TestConsumerTimeoutsPerGroup: a group's own session timeout and
// heartbeat interval reach a member at its next heartbeat, as Apache's
// GroupMetadataManager reads them from the group config on each one: the
// interval in that answer, and the member expires after the timeout in
// force at its last heartbeat (default 45 s here).
func TestConsumerTimeoutsPerGroup(t *testing.T) {
	for _, tc := range []struct {
		name        string
		set         ConsumerTimeouts
		interval    int32         // in the answer after the change
		survives    time.Duration // silent this long, still a member
		expiresWith time.Duration // silent this long, gone
	}{
		{"broker defaults", ConsumerTimeouts{}, 5000, 44 * time.Second, 46 * time.Second},
		{"shorter session", ConsumerTimeouts{Session: 2 * time.Second}, 5000, 1900 * time.Millisecond, 2100 * time.Millisecond},
		{"longer session", ConsumerTimeouts{Session: 60 * time.Second}, 5000, 59 * time.Second, 61 * time.Second},
		{"interval only", ConsumerTimeouts{HeartbeatInterval: 7 * time.Second}, 7000, 44 * time.Second, 46 * time.Second},
		{"both", ConsumerTimeouts{Session: 3 * time.Second, HeartbeatInterval: time.Second}, 1000, 2900 * time.Millisecond, 3100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, env := consumerGroupForTest(t)
			env.addTopic("t", 2)
			a := newCMember(t, g, env, "a", "t")
			a.mustOK(a.join())
			settle(t, g, a)
			// Changed while the member is in the group: nothing moves
			// until its next heartbeat.
			g.SetConsumerTimeouts(tc.set)
			res := a.beat()
			a.mustOK(res)
			if res.HeartbeatIntervalMs != tc.interval {
				t.Fatalf("heartbeat interval %d, want %d", res.HeartbeatIntervalMs, tc.interval)
			}
			env.advance(tc.survives)
			if g.cg.members["a"] == nil {
				t.Fatalf("expired after %v", tc.survives)
			}
			env.advance(tc.expiresWith - tc.survives)
			if g.cg.members["a"] != nil {
				t.Fatalf("still a member after %v", tc.expiresWith)
			}
		})
	}
}
