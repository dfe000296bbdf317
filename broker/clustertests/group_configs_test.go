package clustertests

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// Group configs in a cluster live in etcd (group-configs/<group>/<config>)
// like the other entity configs: set through one broker, every broker
// describes them, applied from its watch.
func TestClusterGroupConfigs(t *testing.T) {
	c := newCluster(t, 2)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "cg"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", kmsg.StringPtr("earliest")
	r.Configs = append(r.Configs, cfg)
	alter.Resources = append(alter.Resources, r)
	if resp := brokertest.Dial(t, c.brokers[1].addr).RoundTrip(alter).(*kmsg.IncrementalAlterConfigsResponse); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("set on broker 1: %v", kerr.ErrorForCode(resp.Resources[0].ErrorCode))
	}
	for _, b := range c.brokers {
		conn := brokertest.Dial(t, b.addr)
		brokertest.Eventually(t, 30*time.Second, "the group config described by every broker", func() bool {
			req := kmsg.NewPtrDescribeConfigsRequest()
			req.SetVersion(4) // v1+ carry the source
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, "cg", []string{"share.auto.offset.reset"}
			req.Resources = append(req.Resources, dr)
			resp := conn.RoundTrip(req).(*kmsg.DescribeConfigsResponse)
			res := resp.Resources[0]
			return res.ErrorCode == 0 && len(res.Configs) == 1 && res.Configs[0].Value != nil &&
				*res.Configs[0].Value == "earliest" && res.Configs[0].Source == kmsg.ConfigSourceGroupConfig
		})
	}
}
