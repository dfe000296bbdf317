package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerBeat sends one KIP-848 heartbeat for member id of group
// (epoch 0 joins subscribed to topic) and returns the answer.
func consumerBeat(t *testing.T, cl *kgo.Client, group, id, topic string, epoch int32) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, id, epoch
	if epoch == 0 {
		req.RebalanceTimeoutMillis = 30_000
		req.SubscribedTopicNames = []string{topic}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("heartbeat of %s in %s: %v", id, group, kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

func consumerMembers(t *testing.T, adm *kadm.Client, group string) (int, string) {
	d := describe848(t, adm, group)
	return len(d.Members), fmt.Sprintf("%s: %d members, state %s", group, len(d.Members), d.State)
}

// TestConsumerGroupConfigsApplied: a KIP-848 group's own
// consumer.session.timeout.ms and consumer.heartbeat.interval.ms (GROUP
// configs) override the broker's group.consumer.* values as Apache's
// GroupMetadataManager applies them: the interval in each heartbeat's
// answer, the session timeout restarted by each heartbeat. A member of
// a group with a 60 s session outlives a silent member of a group on the
// broker's 1 s; once its group's session timeout is changed to 1 s, its
// next heartbeat runs with it and it expires after it.
func TestConsumerGroupConfigsApplied(t *testing.T) {
	b := startGroupBroker(t, t.TempDir(), func(c *Config) {
		c.ConsumerHeartbeatInterval = 100 * time.Millisecond
		c.ConsumerSessionTimeout = time.Second
	})
	addr := b.Addr()
	adm := newAdmin(t, addr)
	cl := newClient(t, b)
	createGroupTopic(t, adm, "cgc", 2)

	if code, msg := alterGroupConfigsReq(t, cl, "slow", kmsg.IncrementalAlterConfigOpSet, false,
		"consumer.session.timeout.ms", "60000", "consumer.heartbeat.interval.ms", "2000"); code != 0 {
		t.Fatalf("setting slow's configs: %v %s", kerr.ErrorForCode(code), msg)
	}
	slow := consumerBeat(t, cl, "slow", "slow-member-0000000001", "cgc", 0)
	if slow.HeartbeatIntervalMillis != 2000 {
		t.Fatalf("slow's heartbeat interval %d, want its group's 2000", slow.HeartbeatIntervalMillis)
	}
	fast := consumerBeat(t, cl, "fast", "fast-member-0000000001", "cgc", 0)
	if fast.HeartbeatIntervalMillis != 100 {
		t.Fatalf("fast's heartbeat interval %d, want the broker's 100", fast.HeartbeatIntervalMillis)
	}

	// Both go silent: fast's member expires after the broker's 1 s,
	// slow's stays for its group's 60 s.
	waitUntil(t, 30*time.Second, "fast's silent member expired", func() (bool, string) {
		n, s := consumerMembers(t, adm, "fast")
		return n == 0, s
	})
	if n, s := consumerMembers(t, adm, "slow"); n != 1 {
		t.Fatalf("slow's member expired with the broker's session timeout: %s", s)
	}

	// slow's session timeout changed to 1 s (and its interval to 500 ms, below
	// it): its next heartbeat takes them.
	if code, msg := alterGroupConfigsReq(t, cl, "slow", kmsg.IncrementalAlterConfigOpSet, false,
		"consumer.session.timeout.ms", "1000", "consumer.heartbeat.interval.ms", "500"); code != 0 {
		t.Fatalf("changing slow's session timeout: %v %s", kerr.ErrorForCode(code), msg)
	}
	again := consumerBeat(t, cl, "slow", "slow-member-0000000001", "cgc", slow.MemberEpoch)
	if again.HeartbeatIntervalMillis != 500 {
		t.Fatalf("slow's heartbeat interval %d after the change, want 500", again.HeartbeatIntervalMillis)
	}
	waitUntil(t, 30*time.Second, "slow's member expired with its group's new 1 s", func() (bool, string) {
		n, s := consumerMembers(t, adm, "slow")
		return n == 0, s
	})

	// Deleted: the group runs with the broker's values again.
	if code, msg := alterGroupConfigsReq(t, cl, "slow", kmsg.IncrementalAlterConfigOpDelete, false,
		"consumer.session.timeout.ms", "", "consumer.heartbeat.interval.ms", ""); code != 0 {
		t.Fatalf("deleting slow's configs: %v %s", kerr.ErrorForCode(code), msg)
	}
	if r := consumerBeat(t, cl, "slow", "slow-member-0000000002", "cgc", 0); r.HeartbeatIntervalMillis != 100 {
		t.Fatalf("heartbeat interval %d once slow's configs are deleted, want the broker's 100", r.HeartbeatIntervalMillis)
	}
}
