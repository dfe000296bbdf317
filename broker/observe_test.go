package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker"
	"kaas/broker/admin"
)

// startObservedBroker starts a broker with its admin listener on an
// ephemeral loopback port; it is closed when the test ends.
func startObservedBroker(t *testing.T) *broker.Broker {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
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
	return b
}

func newClient(t *testing.T, b *broker.Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// trafficResult is what runTraffic did.
type trafficResult struct {
	topic      string
	perPart    int
	producerID int64 // the idempotent producer
	txnID      string
	txnPID     int64 // the transactional producer, which wrote to partition 0
}

// runTraffic creates a 3-partition topic (twice: the second is an error
// the metrics must count), produces perPart idempotent records to each
// partition, commits a transaction of one record to partition 0 (so
// partition 0 ends at perPart+2: the record and its COMMIT marker) and
// consumes everything.
func runTraffic(t *testing.T, b *broker.Broker) trafficResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, parts, perPart = "orders", 3, 100
	adm := kadm.NewClient(newClient(t, b))
	if _, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if resp, err := adm.CreateTopic(ctx, parts, 1, nil, topic); err == nil && resp.Err == nil {
		t.Fatal("creating the topic twice succeeded")
	}
	prod := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for p := range int32(parts) {
		for i := range perPart {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("value-%d-%d", p, i))})
		}
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, _, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const txnID = "observe-txn"
	txp := newClient(t, b, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(txnID))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("in a transaction")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	txnPID, _, err := txp.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// EndTxn is answered once the markers are durable; the CompleteCommit
	// record follows without anyone waiting for it (state/txncoord).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		d, err := adm.DescribeTransactions(ctx, txnID)
		if err == nil && d[txnID].State == "CompleteCommit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transaction never reached CompleteCommit: %+v, %v", d, err)
		}
	}
	cons := newClient(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	for got := 0; got < parts*perPart+1; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	return trafficResult{topic: topic, perPart: perPart, producerID: pid, txnID: txnID, txnPID: txnPID}
}

func scrape(t *testing.T, b *broker.Broker) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + b.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value finds the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("metric %s missing from the scrape", name)
	}
next:
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("metric %s has no sample labelled %v", name, want)
	return 0
}

func TestMetricsReportTrafficPartitionsActorsAndErrors(t *testing.T) {
	b := startObservedBroker(t)
	tr := runTraffic(t, b)
	fams := scrape(t, b)

	for p := range 3 {
		l := map[string]string{"topic": tr.topic, "partition": strconv.Itoa(p)}
		end, producers := float64(tr.perPart), 1.0
		if p == 0 { // the transaction's record and marker, and its producer
			end, producers = float64(tr.perPart+2), 2
		}
		for name, want := range map[string]float64{
			"kaas_partition_high_watermark":     end,
			"kaas_partition_log_end_offset":     end,
			"kaas_partition_last_stable_offset": end,
			"kaas_partition_lso_lag":            0,
			"kaas_partition_log_start_offset":   0,
			"kaas_partition_segments":           1,
			"kaas_partition_producer_ids":       producers,
		} {
			if got := value(t, fams, name, l); got != want {
				t.Errorf("%s%v = %v, want %v", name, l, got, want)
			}
		}
		if got := value(t, fams, "kaas_partition_log_size_bytes", l); got <= 0 {
			t.Errorf("log size of partition %d = %v", p, got)
		}
	}
	topic := map[string]string{"topic": tr.topic}
	for name, want := range map[string]float64{
		"kaas_partitions":              3,
		"kaas_partition_leaders":       3,
		"kaas_topics":                  1,
		"kaas_topic_records_in_total":  float64(3*tr.perPart + 1),
		"kaas_topic_records_out_total": float64(3*tr.perPart + 2), // the consumer also fetched the COMMIT marker
	} {
		if got := value(t, fams, name, topic); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if in, out := value(t, fams, "kaas_topic_bytes_in_total", topic), value(t, fams, "kaas_topic_bytes_out_total", topic); in <= 0 || out <= in {
		t.Errorf("bytes in %v, out %v: want out = in + the marker batch", in, out)
	}
	if got := value(t, fams, "kaas_transactions_committed_total", nil); got != 1 {
		t.Errorf("transactions committed = %v, want 1", got)
	}
	if got := value(t, fams, "kaas_transactions", map[string]string{"state": "CompleteCommit"}); got != 1 {
		t.Errorf("transactions in CompleteCommit = %v, want 1", got)
	}
	if got := value(t, fams, "kaas_request_errors_total", map[string]string{"api": "CreateTopics", "error": "TOPIC_ALREADY_EXISTS"}); got != 1 {
		t.Errorf("CreateTopics TOPIC_ALREADY_EXISTS counted %v times, want 1", got)
	}
	if got := value(t, fams, "kaas_fetch_response_bytes", nil); got < 1 {
		t.Errorf("fetch sizes observed %v times", got)
	}
	part := map[string]string{"kind": "partition"}
	if got := value(t, fams, "kaas_actors", part); got != 3 {
		t.Errorf("partition actors = %v, want 3", got)
	}
	if got := value(t, fams, "kaas_actor_messages_processed_total", part); got < 3 {
		t.Errorf("partition actors processed %v messages, want at least one produce each", got)
	}
	value(t, fams, "kaas_actor_mailbox_depth", part)
	if got := value(t, fams, "kaas_connections", nil); got < 1 {
		t.Errorf("connections = %v with clients connected", got)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "kaas_fsync_duration_seconds", "kaas_request_duration_seconds"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}

func getJSON(t *testing.T, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("%s: %v\n%s", url, err, body)
	}
	return resp.StatusCode
}

func TestInspectorSnapshotShowsPartitionState(t *testing.T) {
	b := startObservedBroker(t)
	tr := runTraffic(t, b)
	base := "http://" + b.AdminAddr()

	var txnSnap admin.Snapshot
	getJSON(t, base+"/api/actors?kind=txn", &txnSnap)
	if len(txnSnap.Actors) != 1 || txnSnap.Actors[0].Name != "txn/"+tr.txnID {
		t.Fatalf("txn actors %+v, want txn/%s", txnSnap.Actors, tr.txnID)
	}
	if s := txnSnap.Actors[0].Summary; s["state"] != "CompleteCommit" || s["producer_id"] != float64(tr.txnPID) || (s["partitions"] != nil && s["partitions"] != float64(0)) {
		t.Errorf("txn summary %v: want CompleteCommit, producer %d, no partitions left", s, tr.txnPID)
	}

	var snap admin.Snapshot
	getJSON(t, base+"/api/actors?kind=partition", &snap)
	if len(snap.Actors) != 3 {
		t.Fatalf("snapshot lists %d partition actors, want 3: %+v", len(snap.Actors), snap.Actors)
	}
	for _, a := range snap.Actors {
		if a.Kind != "partition" || !strings.HasPrefix(a.Name, "partition/"+tr.topic+"-") {
			t.Errorf("unexpected actor %s/%s", a.Kind, a.Name)
		}
		if a.Processed < 1 || a.LastMessageAgeSec < 0 {
			t.Errorf("%s: processed %d, last message age %v: want traffic seen", a.Name, a.Processed, a.LastMessageAgeSec)
		}
		wantHW, wantProducers := float64(tr.perPart), 1.0
		if a.Name == "partition/"+tr.topic+"-0" {
			wantHW, wantProducers = float64(tr.perPart+2), 2
		}
		if hw, _ := a.Summary["hw"].(float64); hw != wantHW {
			t.Errorf("%s summary hw = %v, want %v (summary %v)", a.Name, a.Summary["hw"], wantHW, a.Summary)
		}
		if n, _ := a.Summary["producers"].(float64); n != wantProducers {
			t.Errorf("%s summary producers = %v, want %v", a.Name, a.Summary["producers"], wantProducers)
		}
	}

	var d struct {
		admin.Actor
		State struct {
			HighWatermark int64 `json:"high_watermark"`
			EndOffset     int64 `json:"log_end_offset"`
			Producers     []struct {
				ProducerID   int64 `json:"producer_id"`
				Epoch        int16 `json:"epoch"`
				LastSequence int32 `json:"last_sequence"`
			} `json:"producers"`
		} `json:"state"`
	}
	if code := getJSON(t, base+"/api/actors/partition/"+tr.topic+"-1", &d); code != http.StatusOK {
		t.Fatalf("detail answered %d", code)
	}
	if d.State.HighWatermark != int64(tr.perPart) || d.State.EndOffset != int64(tr.perPart) {
		t.Errorf("detail hw %d end %d, want %d", d.State.HighWatermark, d.State.EndOffset, tr.perPart)
	}
	if len(d.State.Producers) != 1 || d.State.Producers[0].ProducerID != tr.producerID || d.State.Producers[0].LastSequence != int32(tr.perPart-1) {
		t.Errorf("detail producers %+v, want producer %d at last sequence %d", d.State.Producers, tr.producerID, tr.perPart-1)
	}

	var missing map[string]string
	if code := getJSON(t, base+"/api/actors/partition/nope-0", &missing); code != http.StatusNotFound {
		t.Errorf("unknown actor answered %d, want 404", code)
	}

}
