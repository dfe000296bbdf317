package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestConsumerGroup848ACLs: with the authorizer on, ConsumerGroupHeartbeat
// needs READ on the group and DESCRIBE on every subscribed topic, and
// ConsumerGroupDescribe DESCRIBE on the group and on the topics its
// members read, as Apache 4.0 checks them.
func TestConsumerGroup848ACLs(t *testing.T) {
	s := startSecure(t)
	adm := s.admin(t, "admin")
	for _, topic := range []string{"acl848", "secret848"} {
		if _, err := adm.CreateTopic(brokertest.Context(t, 10*time.Second), 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	alice := s.conn(t, lSASL, "alice")
	heartbeat := func(topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = 1, "g848", "alice-1", 0, 30000
		r.SubscribedTopicNames, r.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return alice.RoundTrip(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	describe := func() int16 {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Version, r.Groups = 1, []string{"g848"}
		return alice.RoundTrip(r).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode
	}
	if code := heartbeat("acl848").ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat without READ on the group: %v", kerr.ErrorForCode(code))
	}
	s.grant(t, kadm.NewACLs().Allow(aliceUser).Groups("g848").Operations(kadm.OpRead))
	resp := heartbeat("acl848", "secret848")
	if resp.ErrorCode != kerr.TopicAuthorizationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != "The following topics are not authorized: acl848, secret848." {
		t.Fatalf("heartbeat without DESCRIBE on the topics: %v %v", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	s.grant(t, kadm.NewACLs().Allow(aliceUser).Topics("acl848").Operations(kadm.OpDescribe))
	if resp := heartbeat("acl848"); resp.ErrorCode != 0 || resp.MemberEpoch != 1 {
		t.Fatalf("heartbeat with the ACLs: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if code := describe(); code != 0 {
		t.Fatalf("describe with READ (implies DESCRIBE) on the group: %v", kerr.ErrorForCode(code))
	}
	// Another member reads a topic alice may not describe: the group is
	// hidden from her.
	bob := s.conn(t, lSASL, "admin")
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = 1, "g848", "admin-1", 0, 30000
	r.SubscribedTopicNames, r.Topics = []string{"secret848"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := bob.RoundTrip(r).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("super user's heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if code := describe(); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("describe of a group reading a hidden topic: %v", kerr.ErrorForCode(code))
	}

	// A regex resolves to the topics alice may describe (KAFKA-18813).
	s.grant(t, kadm.NewACLs().Allow(aliceUser).Groups("g848re").Operations(kadm.OpRead))
	re := "(acl|secret)848"
	rr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	rr.Version, rr.Group, rr.MemberID, rr.MemberEpoch, rr.RebalanceTimeoutMillis = 1, "g848re", "alice-2", 0, 30000
	rr.SubscribedTopicRegex, rr.Topics = &re, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if resp := alice.RoundTrip(rr).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != 0 {
		t.Fatalf("regex heartbeat: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	ds, err := adm.DescribeConsumerGroups(brokertest.Context(t, 10*time.Second), "g848re")
	if err != nil {
		t.Fatal(err)
	}
	if d := ds["g848re"]; len(d.Members) != 1 || len(d.Members[0].Assignment) != 1 || len(d.Members[0].Assignment["acl848"]) != 1 {
		t.Fatalf("regex member's assignment (secret848 must stay out): %+v", d.Members)
	}
}
