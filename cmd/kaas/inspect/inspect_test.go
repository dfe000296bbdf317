package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/broker/admin"
)

// startBrokerWithTraffic starts a broker with its admin listener, and
// produces perPart idempotent records to each of the topic's partitions.
func startBrokerWithTraffic(t *testing.T, topic string, parts, perPart int) *broker.Broker {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.Listen, cfg.AdminAddr, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	cfg.DefaultPartitions = int32(parts)
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("closing broker: %v", err)
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := range parts {
		for i := range perPart {
			recs = append(recs, &kgo.Record{Partition: int32(p), Value: []byte(fmt.Sprint(i))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestJSONSnapshotAndDetail(t *testing.T) {
	b := startBrokerWithTraffic(t, "clicks", 2, 7)
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Admin: b.AdminAddr(), JSON: true, Filter: "clicks", Out: &out}); err != nil {
		t.Fatal(err)
	}
	var snap admin.Snapshot
	if err := json.Unmarshal(out.Bytes(), &snap); err != nil {
		t.Fatalf("--json printed no snapshot: %v\n%s", err, out.String())
	}
	if len(snap.Actors) != 2 || snap.Actors[0].Name != "partition/clicks-0" || snap.Actors[0].Summary["hw"] != float64(7) {
		t.Fatalf("snapshot %+v: want partition/clicks-0 and -1 at hw 7", snap.Actors)
	}

	out.Reset()
	if err := Run(context.Background(), Options{Admin: b.AdminAddr(), JSON: true, Actor: "partition/clicks-1", Out: &out}); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Name  string `json:"name"`
		State struct {
			EndOffset int64 `json:"log_end_offset"`
			Producers []struct {
				LastSequence int32 `json:"last_sequence"`
			} `json:"producers"`
		} `json:"state"`
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "partition/clicks-1" || d.State.EndOffset != 7 || len(d.State.Producers) != 1 || d.State.Producers[0].LastSequence != 6 {
		t.Fatalf("detail %+v: want end offset 7 and one producer at sequence 6", d)
	}

	if err := Run(context.Background(), Options{Admin: b.AdminAddr(), JSON: true, Actor: "partition/nope-0", Out: &out}); err == nil || !strings.Contains(err.Error(), "no actor named") {
		t.Errorf("unknown actor: err %v", err)
	}
}

// waitScreen waits until the rendered output contains every string.
func waitScreen(t *testing.T, tm *teatest.TestModel, want ...string) {
	t.Helper()
	var seen []byte
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seen = append(seen, b...)
		for _, w := range want {
			if !bytes.Contains(seen, []byte(w)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

// The live view lists actors by kind with their state, filters, drills
// into one actor's state tree and goes back — driven headless.
func TestLiveViewListsFiltersAndDrillsIn(t *testing.T) {
	b := startBrokerWithTraffic(t, "orders", 3, 5)
	m := NewModel(NewClient(b.AdminAddr()), b.AdminAddr(), "", "", 100*time.Millisecond)
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(140, 30))

	n := len(b.Actors().Actors()) // partitions plus the broker's other actors
	waitScreen(t, tm, "partition (3)", "partition/orders-0", "partition/orders-2", "hw=5", fmt.Sprintf("%d/%d actors", n, n))

	tm.Type("/orders-2")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	waitScreen(t, tm, fmt.Sprintf("1/%d actors", n), "filter: orders-2")

	tm.Send(tea.KeyMsg{Type: tea.KeyEnter}) // inspect the one row left
	waitScreen(t, tm, "partition/orders-2", "high_watermark: 5", "producers: (1)", "last_sequence: 4", "esc back")

	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	waitScreen(t, tm, "MAILBOX", fmt.Sprintf("1/%d actors", n))

	tm.Type("q")
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
	final := tm.FinalModel(t).(Model)
	if len(final.rows) != 1 || final.rows[0].Name != "partition/orders-2" {
		t.Errorf("final rows %+v, want only partition/orders-2", final.rows)
	}
}
