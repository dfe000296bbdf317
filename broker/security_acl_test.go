package broker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/net/server"
)

// ACLs granted and revoked through kadm, each denial observed with its
// exact code on the wire: topics (TOPIC_AUTHORIZATION_FAILED), groups
// (GROUP_AUTHORIZATION_FAILED), transactional ids
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the cluster
// (CLUSTER_AUTHORIZATION_FAILED); DENY beats ALLOW; Metadata hides what
// the principal may not describe; ACLs survive a restart.
func TestACLs(t *testing.T) {
	s := startSecure(t)
	ctx := brokertest.Context(t, 90*time.Second)
	admin := s.admin(t, "admin")
	for _, topic := range []string{"orders", "payments", "team-a.x"} {
		if _, err := admin.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	alice := s.conn(t, lSASL, "alice")
	grant := func(b *kadm.ACLBuilder) { t.Helper(); s.grant(t, b) }
	revoke := func(b *kadm.ACLBuilder) {
		t.Helper()
		res, err := admin.DeleteACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("delete ACL: %v", r.Err)
			}
		}
	}
	produce := func(topic string) int16 {
		t.Helper()
		r := alice.RoundTrip(brokertest.ProduceRequest(topic, 0, -1, brokertest.Batch("v"))).(*kmsg.ProduceResponse)
		return r.Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(topic string) int16 {
		t.Helper()
		r := alice.RoundTrip(brokertest.FetchRequest(topic, 0, 0, 0, 0, 1<<20, 1<<20)).(*kmsg.FetchResponse)
		return r.Topics[0].Partitions[0].ErrorCode
	}
	metadata := func(topics ...string) *kmsg.MetadataResponse {
		t.Helper()
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		if topics != nil {
			md.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, tp := range topics {
			md.Topics = append(md.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(tp)})
		}
		return alice.RoundTrip(md).(*kmsg.MetadataResponse)
	}
	expect := func(what string, got int16, want *kerr.Error) {
		t.Helper()
		if got != want.Code {
			t.Errorf("%s: got %v, want %v", what, kerr.ErrorForCode(got), want)
		}
	}
	expectOK := func(what string, got int16) {
		t.Helper()
		if got != 0 {
			t.Errorf("%s: %v", what, kerr.ErrorForCode(got))
		}
	}

	// Nothing granted: every topic is hidden and denied.
	if r := metadata(); len(r.Topics) != 0 {
		t.Errorf("metadata for all topics shows %d topics to alice", len(r.Topics))
	}
	expect("metadata orders", metadata("orders").Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	expect("metadata for a topic that does not exist", metadata("nope").Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	expect("produce orders", produce("orders"), kerr.TopicAuthorizationFailed)
	expect("fetch orders", fetch("orders"), kerr.TopicAuthorizationFailed)

	// WRITE on orders: produce works, and WRITE implies DESCRIBE.
	grant(kadm.NewACLs().Allow(aliceUser).Topics("orders").Operations(kadm.OpWrite))
	expectOK("produce orders", produce("orders"))
	if r := metadata(); len(r.Topics) != 1 || *r.Topics[0].Topic != "orders" {
		t.Errorf("metadata after WRITE on orders: %d topics", len(r.Topics))
	}
	expect("fetch orders without READ", fetch("orders"), kerr.TopicAuthorizationFailed)
	expect("produce payments", produce("payments"), kerr.TopicAuthorizationFailed)

	// A prefixed READ.
	grant(kadm.NewACLs().Allow(aliceUser).Topics("team-a.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	expectOK("fetch team-a.x", fetch("team-a.x"))
	expect("fetch orders", fetch("orders"), kerr.TopicAuthorizationFailed)

	// DENY beats ALLOW.
	grant(kadm.NewACLs().Deny(aliceUser).Topics("orders").Operations(kadm.OpWrite))
	expect("produce orders under DENY", produce("orders"), kerr.TopicAuthorizationFailed)
	revoke(kadm.NewACLs().Deny(aliceUser).DenyHosts().Topics("orders").Operations(kadm.OpWrite))
	expectOK("produce orders after the DENY is deleted", produce("orders"))

	// Groups.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g1", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "team-a.x", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	r8 := alice.RoundTrip(commit).(*kmsg.OffsetCommitResponse)
	expect("offset commit for g1", r8.Topics[0].Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKey = 3, "g1"
	expect("find coordinator g1", alice.RoundTrip(fc).(*kmsg.FindCoordinatorResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	grant(kadm.NewACLs().Allow(aliceUser).Groups("g1").Operations(kadm.OpRead))
	expectOK("offset commit for g1", alice.RoundTrip(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	expectOK("find coordinator g1", alice.RoundTrip(fc).(*kmsg.FindCoordinatorResponse).ErrorCode)
	commit.Topics[0].Topic = "payments"
	expect("offset commit for payments", alice.RoundTrip(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// Transactional ids.
	ipi := kmsg.NewPtrInitProducerIDRequest()
	ipi.Version, ipi.TransactionalID, ipi.TransactionTimeoutMillis = 4, kmsg.StringPtr("tx1"), 60000
	expect("init producer id tx1", alice.RoundTrip(ipi).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	// R-IPI-1: the ACL is checked before the claim's shape.
	badClaim := kmsg.NewPtrInitProducerIDRequest()
	badClaim.Version, badClaim.TransactionalID, badClaim.TransactionTimeoutMillis = 4, kmsg.StringPtr("tx1"), 60000
	badClaim.ProducerID, badClaim.ProducerEpoch = 5, -1
	expect("init producer id tx1 with half a claim", alice.RoundTrip(badClaim).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
	grant(kadm.NewACLs().Allow(aliceUser).TransactionalIDs("tx1").Operations(kadm.OpWrite))
	expectOK("init producer id tx1", alice.RoundTrip(ipi).(*kmsg.InitProducerIDResponse).ErrorCode)

	// The cluster: ACL and user management need ALTER on it.
	bob := s.conn(t, lSASL, "bob")
	idem := kmsg.NewPtrInitProducerIDRequest()
	idem.Version = 4
	expect("idempotent init producer id with no WRITE anywhere", bob.RoundTrip(idem).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	expectOK("idempotent init producer id with WRITE on a topic", alice.RoundTrip(idem).(*kmsg.InitProducerIDResponse).ErrorCode)
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.Version = 3
	ca.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "payments", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: aliceUser, Host: "*", Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow}}
	expect("alice creating an ACL", alice.RoundTrip(ca).(*kmsg.CreateACLsResponse).Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version, da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = 3, kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	expect("alice describing ACLs", alice.RoundTrip(da).(*kmsg.DescribeACLsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	markers := kmsg.NewPtrWriteTxnMarkersRequest()
	markers.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, ProducerEpoch: 0, Committed: true,
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "orders", Partitions: []int32{0}}}}}
	expect("alice writing transaction markers", alice.RoundTrip(markers).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	verify := kmsg.NewPtrAddPartitionsToTxnRequest()
	verify.Version = 4
	verify.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "tx1", ProducerID: 1, ProducerEpoch: 0, VerifyOnly: true,
		Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "orders", Partitions: []int32{0}}}}}
	expect("alice verifying a transaction (v4)", alice.RoundTrip(verify).(*kmsg.AddPartitionsToTxnResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	features := kmsg.NewPtrUpdateFeaturesRequest()
	features.Version = 2
	features.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 2}}
	expect("alice updating features without ALTER on the cluster", alice.RoundTrip(features).(*kmsg.UpdateFeaturesResponse).ErrorCode, kerr.ClusterAuthorizationFailed)
	// OffsetForLeaderEpoch: DESCRIBE on each topic, or CLUSTER_ACTION for
	// all; the authorized topics are answered first, as Apache does.
	epochs := func() map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.Version, req.ReplicaID = 4, -1
		for _, topic := range []string{"payments", "orders"} {
			req.Topics = append(req.Topics, kmsg.OffsetForLeaderEpochRequestTopic{Topic: topic,
				Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, LeaderEpoch: 0}}})
		}
		out := map[string]int16{}
		for i, rt := range alice.RoundTrip(req).(*kmsg.OffsetForLeaderEpochResponse).Topics {
			out[rt.Topic] = rt.Partitions[0].ErrorCode
			if i == 0 && out[rt.Topic] != 0 && len(out) == 1 && rt.Topic == "payments" {
				t.Error("OffsetForLeaderEpoch answered the unauthorized topic first")
			}
		}
		return out
	}
	e := epochs()
	expect("offset for leader epoch on payments", e["payments"], kerr.TopicAuthorizationFailed)
	expectOK("offset for leader epoch on orders (DESCRIBE through WRITE)", e["orders"])
	// What brokers send each other, a principal with CLUSTER_ACTION may
	// send (the inter-broker principal: docs/security.md, "Brokers talking
	// to each other").
	grant(kadm.NewACLs().Allow(aliceUser).Clusters().Operations(kadm.OpClusterAction))
	expectOK("offset for leader epoch on payments with CLUSTER_ACTION", epochs()["payments"])
	if code := alice.RoundTrip(markers).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code == kerr.ClusterAuthorizationFailed.Code {
		t.Error("WriteTxnMarkers with CLUSTER_ACTION: still CLUSTER_AUTHORIZATION_FAILED")
	}
	expectOK("verifying a transaction with CLUSTER_ACTION", alice.RoundTrip(verify).(*kmsg.AddPartitionsToTxnResponse).ErrorCode)
	revoke(kadm.NewACLs().Allow(aliceUser).AllowHosts().Clusters().Operations(kadm.OpClusterAction))
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Version = 5
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new-topic", NumPartitions: 1, ReplicationFactor: 1}}
	expect("alice creating a topic", alice.RoundTrip(ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// Listing ACLs as admin.
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().Allow(aliceUser).AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		n += len(d.Described)
	}
	if n != 4 {
		t.Errorf("described %d of alice's ACLs, want 4: %+v", n, described)
	}

	if got := denials(s.b, "Produce", "topic"); got < 3 {
		t.Errorf("kaas_authorization_denials_total{api=Produce,resource_type=topic} = %v", got)
	}

	// ACLs are durable.
	brokertest.Stop(t, s.b)
	s.b = brokertest.StartIn(t, s.dir, brokertest.WithConfig(func(c *broker.Config) {
		c.Listeners = []broker.Listener{{Name: lSASL, Protocol: server.SASLPlaintext, Addr: "127.0.0.1:0"}}
		c.Authorizer, c.SuperUsers = true, []string{superUser}
	}))
	alice = s.conn(t, lSASL, "alice")
	expectOK("produce orders after a restart", produce("orders"))
	expect("produce payments after a restart", produce("payments"), kerr.TopicAuthorizationFailed)
}

// Without --authorizer every request is allowed and the ACL APIs answer
// SECURITY_DISABLED, as Apache with no authorizer.
func TestACLsWithoutAuthorizer(t *testing.T) {
	b := brokertest.Start(t)
	ctx := brokertest.Context(t, 30*time.Second)
	adm := brokertest.Admin(t, b.Addr())
	_, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow(aliceUser).Topics("x").Operations(kadm.OpRead))
	if !errors.Is(err, kerr.SecurityDisabled) {
		res, _ := adm.CreateACLs(ctx, kadm.NewACLs().Allow(aliceUser).Topics("x").Operations(kadm.OpRead))
		if len(res) == 0 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
			t.Errorf("CreateACLs without an authorizer: %v %+v", err, res)
		}
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.Version, da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = 3, kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if r := brokertest.Dial(t, b.Addr()).RoundTrip(da).(*kmsg.DescribeACLsResponse); r.ErrorCode != kerr.SecurityDisabled.Code {
		t.Errorf("DescribeACLs without an authorizer: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	cl := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("open"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// --allow-everyone-if-no-acl: a resource no ACL names is open to all;
// once one names it, only what the ACLs allow. Wildcards over the wire:
// User:* on topic "*" allows everyone everywhere, and a DENY for one
// principal still beats it.
func TestACLsAllowEveryoneIfNoACL(t *testing.T) {
	s := startSecure(t, brokertest.WithConfig(func(c *broker.Config) { c.AllowEveryoneIfNoACL = true }))
	ctx := brokertest.Context(t, 60*time.Second)
	if _, err := s.admin(t, "admin").CreateTopic(ctx, 1, 1, nil, "open"); err != nil {
		t.Fatal(err)
	}
	alice := s.conn(t, lSASL, "alice")
	produce := func() int16 {
		t.Helper()
		r := alice.RoundTrip(brokertest.ProduceRequest("open", 0, -1, brokertest.Batch("v"))).(*kmsg.ProduceResponse)
		return r.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != 0 {
		t.Errorf("produce to a topic no ACL names: %v", kerr.ErrorForCode(code))
	}
	s.grant(t, kadm.NewACLs().Allow("User:bob").Topics("open").Operations(kadm.OpRead))
	if code := produce(); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("produce once an ACL names the topic: %v", kerr.ErrorForCode(code))
	}
	s.grant(t, kadm.NewACLs().Allow("User:*").Topics("*").Operations(kadm.OpWrite))
	if code := produce(); code != 0 {
		t.Errorf("produce under User:* WRITE on *: %v", kerr.ErrorForCode(code))
	}
	s.grant(t, kadm.NewACLs().Deny(aliceUser).Topics("open").Operations(kadm.OpAll))
	if code := produce(); code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("produce under a DENY ALL for alice: %v", kerr.ErrorForCode(code))
	}
}
