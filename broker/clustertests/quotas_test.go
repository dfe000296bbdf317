package clustertests

// A client quota set through one broker of a cluster applies on another:
// it is stored in etcd, and every broker applies it from its watch.

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

func TestClusterQuotaAppliesOnEveryBroker(t *testing.T) {
	c := newCluster(t, 2)
	c.waitMembers(2)
	via0 := c.client(kgo.SeedBrokers(c.brokers[1].addr))
	ctx := brokertest.Context(t, 60*time.Second)
	// A request quota far below anything a request costs: every request
	// of client "limited" is throttled (by at most one window, 1 s).
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ent.Type, ent.Name = "client-id", kmsg.StringPtr("limited")
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = "request_percentage", 1e-9
	e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
	alter.Entries = append(alter.Entries, e)
	resp, err := alter.RequestWith(ctx, via0.Broker(1))
	if err != nil || resp.Entries[0].ErrorCode != 0 {
		t.Fatalf("alter through broker 1: %v %+v", err, resp)
	}

	limited := c.client(kgo.SeedBrokers(c.brokers[2].addr), kgo.ClientID("limited"))
	brokertest.Eventually(t, 30*time.Second, "broker 2 to describe the quota set through broker 1", func() bool {
		d, err := kmsg.NewPtrDescribeClientQuotasRequest().RequestWith(ctx, limited.Broker(2))
		return err == nil && len(d.Entries) == 1 && d.Entries[0].Values[0].Value == 1e-9
	})
	brokertest.Eventually(t, 30*time.Second, "broker 2 to throttle client limited", func() bool {
		m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, limited.Broker(2))
		return err == nil && m.ThrottleMillis > 0
	})
	// Another client is not throttled.
	free := c.client(kgo.SeedBrokers(c.brokers[2].addr), kgo.ClientID("free"))
	if m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, free.Broker(2)); err != nil || m.ThrottleMillis != 0 {
		t.Fatalf("client free: %v, throttled %d ms", err, m.ThrottleMillis)
	}
}
