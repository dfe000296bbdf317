package broker_test

// The inspector's JSON views (what the web page and `kaas inspect` read):
// identity and per-API figures from the same counters /metrics exports,
// an actor's history and links, the transactions and KIP-360 views, the
// event stream, and the embedded page with no outside reference.

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/admin"
	"kaas/broker/brokertest"
)

func TestInspectorViews(t *testing.T) {
	b := startObservedBroker(t)
	base := "http://" + b.AdminAddr()
	brokertest.CreateTopic(t, b.Addr(), "orders", 2, nil)

	// A group that commits, and a transaction left open on orders-1.
	prod := newClient(t, b, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := brokertest.Context(t, 30*time.Second)
	if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("a")}, &kgo.Record{Partition: 0, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, b, kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
	for got := 0; got < 2; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	txp := newClient(t, b, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID("open-one"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("pending")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var o admin.Overview
	kinds := map[string]int{}
	brokertest.Eventually(t, 10*time.Second, "Produce in the per-API figures, and the transaction's actor sampled", func() bool {
		getJSON(t, base+"/api/overview", &o)
		for _, k := range o.Kinds {
			kinds[k.Kind] = k.Actors
		}
		for _, a := range o.APIs {
			// Kinds are sampled on their own tick: wait for the one
			// after the transactional producer's first request.
			if a.API == "Produce" && a.RequestsTotal >= 2 && len(a.Series.T) > 0 && kinds["txn"] > 0 {
				return true
			}
		}
		return false
	})
	if o.Broker.ClusterID == "" || o.Broker.DataDir != b.DataDir() || o.Broker.Listen != b.Addr() || o.Broker.Admin != b.AdminAddr() {
		t.Errorf("identity %+v", o.Broker)
	}
	if len(o.Totals.T) == 0 || len(o.Totals.Values["messages_per_sec"]) != len(o.Totals.T) {
		t.Errorf("totals series %+v", o.Totals)
	}
	if len(o.Connections) == 0 || o.Connections[0].Principal != "User:ANONYMOUS" || o.Connections[0].Remote == "" {
		t.Errorf("overview connections %+v, want the test's clients as User:ANONYMOUS", o.Connections)
	}
	if kinds["partition"] != 2 || kinds["group"] != 1 || kinds["txn"] != 1 {
		t.Errorf("actors by kind %v", kinds)
	}
	// The consumer fetches in a session (KIP-227), listed on the overview.
	sessions := false
	for _, p := range o.Panels {
		sessions = sessions || p.Title == "Fetch sessions (KIP-227)" && len(p.Rows) == 1 && p.Rows[0][2] == "2"
	}
	if !sessions {
		t.Errorf("overview panels %+v: want the consumer's fetch session over orders' 2 partitions", o.Panels)
	}

	// A group links to its committed offsets; the offsets carry the lag.
	var g admin.Detail
	getJSON(t, base+"/api/actors/group/readers", &g)
	if len(g.Relations.Offsets) != 1 || g.Relations.Offsets[0].Partition != "orders-0" || g.Relations.Offsets[0].Offset != 2 || g.Relations.Offsets[0].Lag != 0 {
		t.Errorf("group offsets %+v", g.Relations.Offsets)
	}
	if !hasLink(g.Relations.Links, "member", "") || !hasLink(g.Relations.Links, "offset", "partition/orders-0") {
		t.Errorf("group links %+v", g.Relations.Links)
	}
	// A transactional id links to its partitions; a partition to its
	// producers' transactional ids.
	var x admin.Detail
	getJSON(t, base+"/api/actors/txn/open-one", &x)
	if !x.Running || !hasLink(x.Relations.Links, "partition", "partition/orders-1") {
		t.Errorf("txn detail running %v, links %+v", x.Running, x.Relations.Links)
	}
	var p admin.Detail
	getJSON(t, base+"/api/actors/partition/orders-1", &p)
	if !hasLink(p.Relations.Links, "producer", "txn/open-one") || len(p.History.T) == 0 {
		t.Errorf("partition links %+v, history of %d samples", p.Relations.Links, len(p.History.T))
	}

	var tx admin.Transactions
	getJSON(t, base+"/api/transactions?q=open", &tx)
	if len(tx.Open) != 1 || tx.Open[0].TransactionalID != "open-one" || tx.Open[0].AgeMs < 0 || tx.Open[0].LeftMs > int64(tx.Open[0].TimeoutMs) {
		t.Fatalf("open transactions %+v", tx.Open)
	}
	getJSON(t, base+"/api/transactions?q=orders-1", &tx)
	if len(tx.Partitions) != 1 || tx.Partitions[0].Gap != 1 || len(tx.Partitions[0].OpenTxns) != 1 || tx.Partitions[0].OpenTxns[0].TransactionalID != "open-one" {
		t.Fatalf("orders-1's LSO gap %+v", tx.Partitions)
	}
	if len(tx.Hanging) != 0 {
		t.Errorf("hanging candidates %+v: the coordinator accounts for the open transaction", tx.Hanging)
	}

	// The stream sends the view at once and again with the next sample.
	resp, err := http.Get(base + "/api/stream?view=transactions&q=open-one")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("stream content type %q", ct)
	}
	events := readEvents(t, resp.Body, 2)
	for _, e := range events {
		var v admin.Transactions
		if err := json.Unmarshal([]byte(e), &v); err != nil || len(v.Open) != 1 {
			t.Fatalf("stream event %s: %v", e, err)
		}
	}

	// The page and its assets are in the binary and name nothing outside.
	for _, path := range []string{"/", "/actors/partition/orders-0", "/kip360", "/assets/app.js", "/assets/vendor/uplot/uPlot.iife.min.js"} {
		r, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("%s: HTTP %d, %d bytes", path, r.StatusCode, len(body))
		}
		if path == "/" && (strings.Contains(string(body), "http://") || strings.Contains(string(body), "https://")) {
			t.Errorf("the page references an outside URL:\n%s", body)
		}
	}
}

func hasLink(links []admin.Link, rel, actor string) bool {
	for _, l := range links {
		if l.Rel == rel && l.Actor == actor {
			return true
		}
	}
	return false
}

// readEvents reads n `data:` payloads from a Server-Sent Events body.
func readEvents(t *testing.T, body io.Reader, n int) []string {
	t.Helper()
	got := make(chan []string, 1)
	go func() {
		var out []string
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() && len(out) < n {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out = append(out, data)
			}
		}
		got <- out
	}()
	select {
	case out := <-got:
		if len(out) < n {
			t.Fatalf("stream ended after %d events", len(out))
		}
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("no %d stream events within 10 s", n)
		return nil
	}
}
