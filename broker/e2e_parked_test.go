package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/admin"
)

// TestParkedPartitionsServeProduceAndFetch: a new topic's partitions are
// parked (listed by the inspector, no actor started); a franz-go producer
// and consumer use one of them, which starts its actor and serves both as
// any partition does, while the others stay parked; the inspector keeps
// listing all of them, and counts the used one's messages.
func TestParkedPartitionsServeProduceAndFetch(t *testing.T) {
	b := startObservedBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "parked"
	if _, err := kadm.NewClient(newClient(t, b)).CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	parked := func(p string) bool {
		t.Helper()
		info, ok := b.Actors().Lookup("partition/" + topic + "-" + p)
		if !ok {
			t.Fatalf("partition %s not listed", p)
		}
		return info.PID == nil
	}
	for _, p := range []string{"0", "1", "2", "3"} {
		if !parked(p) {
			t.Fatalf("partition %s started by CreateTopics", p)
		}
	}

	cl := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		r := &kgo.Record{Partition: 2, Value: []byte{byte('a' + i)}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	recs := consumeN(t, b.Addr(), topic, 10)
	for i, r := range recs {
		if r.Partition != 2 || r.Offset != int64(i) || string(r.Value) != string(rune('a'+i)) {
			t.Fatalf("record %d: partition %d offset %d value %q", i, r.Partition, r.Offset, r.Value)
		}
	}
	if parked("2") || !parked("0") || !parked("1") || !parked("3") {
		t.Fatal("want only partition 2 started")
	}

	var snap admin.Snapshot
	getJSON(t, "http://"+b.AdminAddr()+"/api/actors?kind=partition", &snap)
	if len(snap.Actors) != 4 {
		t.Fatalf("inspector lists %d partitions, want 4", len(snap.Actors))
	}
	for _, a := range snap.Actors {
		hw, _ := a.Summary["hw"].(float64)
		if a.Name == "partition/"+topic+"-2" {
			if hw != 10 || a.Processed < 10 {
				t.Errorf("%s: hw %v, %d messages processed; want 10 and at least 10", a.Name, a.Summary["hw"], a.Processed)
			}
		} else if hw != 0 || a.Processed != 0 || a.MailboxDepth != 0 {
			t.Errorf("%s (parked): hw %v, %d processed, depth %d", a.Name, a.Summary["hw"], a.Processed, a.MailboxDepth)
		}
	}
}
