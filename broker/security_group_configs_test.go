package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestGroupConfigACLs: GROUP config resources need DESCRIBE_CONFIGS /
// ALTER_CONFIGS on the group, as Apache's ConfigHelper and
// ControllerApis check; without them the answer is
// GROUP_AUTHORIZATION_FAILED, and a grant on the group is enough.
func TestGroupConfigACLs(t *testing.T) {
	s := startSecure(t)
	alice := s.client(t, lSASL, "alice", "SCRAM-SHA-256")
	describe := func(cl *kgo.Client, group string) int16 {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(brokertest.Context(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	alter := func(cl *kgo.Client, group string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(brokertest.Context(t, 10*time.Second), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Resources[0].ErrorCode
	}
	if c := describe(alice, "sg"); c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("describe without DESCRIBE_CONFIGS: %v", kerr.ErrorForCode(c))
	}
	if c := alter(alice, "sg"); c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alter without ALTER_CONFIGS: %v", kerr.ErrorForCode(c))
	}
	s.grant(t, kadm.NewACLs().Allow(aliceUser).Groups("sg").Operations(kadm.OpDescribeConfigs, kadm.OpAlterConfigs))
	if c := describe(alice, "sg"); c != 0 {
		t.Fatalf("describe with DESCRIBE_CONFIGS: %v", kerr.ErrorForCode(c))
	}
	if c := alter(alice, "sg"); c != 0 {
		t.Fatalf("alter with ALTER_CONFIGS: %v", kerr.ErrorForCode(c))
	}
	if c := alter(alice, "other"); c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alter of another group: %v", kerr.ErrorForCode(c))
	}
}
