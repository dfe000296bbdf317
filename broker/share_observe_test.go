package broker_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/actors/share"
	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/broker/brokertest/sharefetch"
)

// TestShareInspectorAndMetrics: the inspector's share coordinator view
// shows each share-partition's window with its in-flight records (state,
// holder, delivery count, lock deadline), and /metrics the share
// counters, live.
func TestShareInspectorAndMetrics(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) {
		c.AdminAddr = "127.0.0.1:0"
		c.ShareAutoOffsetReset = "earliest"
	}))
	brokertest.CreateTopic(t, b.Addr(), "inspected", 1, nil)
	ctx := brokertest.Context(t, 30*time.Second)
	prod := brokertest.Client(t, b.Addr(), kgo.DefaultProduceTopic("inspected"))
	for range 5 {
		if err := prod.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := brokertest.Client(t, b.Addr())
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.SubscribedTopicNames = "viewed", "member-one", []string{"inspected"}
	hbr, err := hb.RequestWith(ctx, cl)
	if err != nil || hbr.ErrorCode != 0 {
		t.Fatal(err, hbr)
	}
	group, member := "viewed", "member-one"
	tid := hbr.Assignment.TopicPartitions[0].TopicID
	f := sharefetch.Request(group, member, 0, tid, 0, 5000, 100)
	fr, err := f.RequestWith(ctx, cl)
	if err != nil || fr.ErrorCode != 0 || len(fr.Topics) != 1 || len(fr.Topics[0].Partitions[0].AcquiredRecords) != 1 {
		t.Fatal(err, fr)
	}
	a := kmsg.NewPtrShareAcknowledgeRequest()
	a.GroupID, a.MemberID, a.ShareSessionEpoch = &group, &member, 1
	at := kmsg.NewShareAcknowledgeRequestTopic()
	at.TopicID = tid
	ap := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ap.AcknowledgementBatches = []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 1, AcknowledgeTypes: []int8{1}}}
	at.Partitions = append(at.Partitions, ap)
	a.Topics = append(a.Topics, at)
	if ar, err := a.RequestWith(ctx, cl); err != nil || ar.ErrorCode != 0 || ar.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(err, ar)
	}

	base := "http://" + b.AdminAddr()
	var d struct {
		State share.View `json:"state"`
	}
	getJSON(t, base+"/api/actors/share/coordinator", &d)
	if len(d.State.Groups) != 1 || len(d.State.Groups[0].Partitions) != 1 || len(d.State.Groups[0].Members) != 1 {
		t.Fatalf("inspector view %+v", d.State)
	}
	p := d.State.Groups[0].Partitions[0]
	if p.Topic != "inspected" || p.SPSO != 2 || p.SPEO != 4 || p.Acquired != 3 || len(p.InFlight) != 3 {
		t.Fatalf("share-partition %+v", p)
	}
	if r := p.InFlight[0]; r.Offset != 2 || r.State != "Acquired" || r.Member != member || r.Deliveries != 1 || r.Deadline == nil || r.Deadline.Before(time.Now()) {
		t.Fatalf("in-flight record %+v", r)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`kaas_share_records_acquired_total{group="viewed",partition="0",topic="inspected"} 5`,
		`kaas_share_records_acknowledged_total{group="viewed",partition="0",topic="inspected"} 2`,
		`kaas_share_records_in_flight{group="viewed",partition="0",state="acquired",topic="inspected"} 3`,
		`kaas_share_partition_start_offset{group="viewed",partition="0",topic="inspected"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
