package clustertests

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/storage/partlog/batchtest"
)

// coordinatorOf asks the cluster which broker coordinates txnID.
func (c *cluster) coordinatorOf(txnID string) int32 { return c.findCoordinator(1, txnID) }

// groupCoordinatorOf asks the cluster which broker coordinates group.
func (c *cluster) groupCoordinatorOf(group string) int32 { return c.findCoordinator(0, group) }

// findCoordinator is FindCoordinator for a key of the given type (0 a
// group, 1 a transactional id).
func (c *cluster) findCoordinator(keyType int8, key string) int32 {
	c.t.Helper()
	cl := c.client()
	var id int32 = -1
	brokertest.Eventually(c.t, 30*time.Second, "a coordinator for "+key, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = keyType, key
		req.CoordinatorKeys = []string{key}
		resp, err := req.RequestWith(brokertest.Context(c.t, 5*time.Second), cl)
		if err != nil {
			return false
		}
		if len(resp.Coordinators) > 0 {
			co := resp.Coordinators[0]
			id = co.NodeID
			return co.ErrorCode == 0
		}
		id = resp.NodeID
		return resp.ErrorCode == 0
	})
	return id
}

// oneLedBy picks, for each broker, one partition of topic it leads.
func oneLedBy(leaders map[int32][2]int32) map[int32]int32 {
	out := map[int32]int32{}
	for p := int32(0); p < int32(len(leaders)); p++ {
		if _, ok := out[leaders[p][0]]; !ok {
			out[leaders[p][0]] = p
		}
	}
	return out
}

// A transaction spanning partitions led by all three brokers, with its
// coordinator on one of them: the markers reach the two peers over
// WriteTxnMarkers, several partitions' markers to one peer in one request,
// and their transactional batches are verified with the coordinator
// (AddPartitionsToTxn v4). A read_committed consumer sees every committed
// record once and no aborted one.
func TestClusterTransactions(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts, perPart = "txn-spread", 12, 20
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	led := oneLedBy(leaders)
	if len(led) != 3 {
		t.Fatalf("partitions of %s are led by %d brokers, want 3: %v", topic, len(led), led)
	}
	coordinator := c.coordinatorOf("spread")
	t.Logf("coordinator %d; partitions by leader %v", coordinator, led)

	prod := c.client(kgo.TransactionalID("spread"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
	ctx := brokertest.Context(t, 90*time.Second)
	want := map[string]bool{}
	for round, commit := range []bool{true, false, true} {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(parts) {
			for i := 0; i < perPart; i++ {
				v := fmt.Sprintf("r%d-p%d-%d", round, p, i)
				if commit {
					want[v] = true
				}
				prod.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(v)}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce %s: %v", v, err)
					}
				})
			}
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatalf("ending transaction %d (commit %v): %v", round, commit, err)
		}
	}
	// The last committed round is visible only once the aborted one's
	// markers are written on every broker (its batches hold the LSO).
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]int{}
	brokertest.Eventually(t, 60*time.Second, "every committed record read_committed", func() bool {
		fs := cons.PollFetches(brokertest.Context(t, 2*time.Second))
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		return len(seen) >= len(want)
	})
	for v, n := range seen {
		if !want[v] || n != 1 {
			t.Errorf("read %s %d times (committed: %v)", v, n, want[v])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("read %d distinct records, want %d", len(seen), len(want))
	}

	// Visible: every broker's /api/cluster counts the coordinator slots
	// each broker owns (every one of the 50 + 50 owned, spread over all
	// three), a peer counted its verifications on /metrics, and the
	// inspector's overview lists the three brokers with their slots.
	var peer int32
	for id := range led {
		if id != coordinator {
			peer = id
		}
		st := c.status(id)
		txn, offsets := 0, 0
		for b, n := range st.Slots {
			txn, offsets = txn+n.Txn, offsets+n.Offsets
			if n.Txn == 0 || n.Offsets == 0 {
				t.Errorf("broker %d's /api/cluster: broker %s owns %+v coordinator slots", id, b, n)
			}
		}
		if txn != 50 || offsets != 50 || len(st.Slots) != 3 || st.Slots[fmt.Sprint(coordinator)].Txn == 0 {
			t.Errorf("broker %d's /api/cluster: coordinator slots %+v (the coordinator of spread is %d)", id, st.Slots, coordinator)
		}
	}
	if m := string(c.adminGet(peer, "/metrics")); !regexp.MustCompile(`(?m)^kaas_cluster_peer_verifications_total [1-9]`).MatchString(m) {
		t.Errorf("broker %d verified no batch with the coordinator, says /metrics", peer)
	}
	// Markers travel batched per broker (each peer leads several of the
	// transactions' partitions): fewer WriteTxnMarkers requests than
	// markers.
	m := string(c.adminGet(coordinator, "/metrics"))
	markers, requests := metricValue(m, "kaas_cluster_peer_markers_total"), metricValue(m, "kaas_cluster_peer_marker_requests_total")
	t.Logf("the coordinator sent %v markers to its peers in %v WriteTxnMarkers requests", markers, requests)
	onPeers := 0
	for _, l := range leaders {
		if l[0] != coordinator {
			onPeers++
		}
	}
	if markers < float64(3*onPeers) || requests <= 0 || requests >= markers {
		t.Errorf("coordinator's /metrics: %v markers to peers in %v requests; want at least %d markers (3 transactions, %d partitions led by peers), in fewer requests", markers, requests, 3*onPeers, onPeers)
	}
	// franz-go ran transaction version 2 (R-TV2-2, R-TV2-5): three EndTxn
	// v5 at the coordinator, Produce v12 on the peers, which added their
	// partitions at the coordinator with AddPartitionsToTxn v5.
	if v := metricValue(m, `kaas_requests_total{api="EndTxn",version="5"}`); v != 3 {
		t.Errorf("the coordinator answered EndTxn v5 %v times, want 3", v)
	}
	if v := metricValue(m, `kaas_requests_total{api="AddPartitionsToTxn",version="5"}`); v == 0 {
		t.Error("the coordinator answered no AddPartitionsToTxn v5 from the partitions' leaders")
	}
	if v := metricValue(string(c.adminGet(peer, "/metrics")), `kaas_requests_total{api="Produce",version="12"}`); v == 0 {
		t.Errorf("broker %d answered no Produce v12", peer)
	}
	var ov struct {
		Panels []struct {
			Title string     `json:"title"`
			Rows  [][]string `json:"rows"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(c.adminGet(peer, "/api/overview"), &ov); err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, p := range ov.Panels {
		if p.Title == "Cluster brokers" {
			rows = p.Rows
		}
	}
	if len(rows) != 3 {
		t.Fatalf("inspector's Cluster brokers panel: %v", ov.Panels)
	}
	for _, r := range rows {
		if r[4] == "0" || r[5] == "0" {
			t.Errorf("Cluster brokers row %v: no transaction or offsets slots", r)
		}
	}
}

// The cross-broker fence ring (the seed, R-FEN): a new session of a
// transactional id on its coordinator bumps the producer epoch; a zombie
// of the old session writing through another broker is refused there —
// idempotent batches by that broker's fence ring (it polls the
// coordinator's fence file), transactional ones at once, through the
// coordinator.
func TestClusterZombieFencedAcrossBrokers(t *testing.T) {
	c := newCluster(t, 3)
	const topic, parts = "zombie", 12
	c.createTopic(topic, parts)
	leaders := c.leaders(topic, parts)
	coordinator := c.coordinatorOf("z")
	var other int32 = -1
	var onOther []int32
	for p := int32(0); p < parts; p++ {
		if l := leaders[p][0]; l != coordinator && (other == -1 || l == other) {
			other = l
			onOther = append(onOther, p)
		}
	}
	if len(onOther) < 3 {
		t.Fatalf("want 3 partitions led by one broker other than the coordinator %d: %v", coordinator, leaders)
	}
	t.Logf("coordinator %d, zombie writes through broker %d to partitions %v", coordinator, other, onOther)

	ctx := brokertest.Context(t, 90*time.Second)
	zombie := c.client(kgo.TransactionalID("z"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := zombie.ProduceSync(ctx, &kgo.Record{Partition: onOther[0], Value: []byte("z-1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := zombie.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An idempotent batch of the zombie's (pid, epoch) through the other
	// broker is accepted before the new session...
	raw := brokertest.Dial(t, c.brokers[other].addr)
	defer raw.Close()
	idem := func(p int32, v string) int16 {
		b := batchtest.Build(batchtest.Opts{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Timestamp: time.Now().UnixMilli()}, v)
		resp := raw.RoundTrip(brokertest.ProduceRequest(topic, p, -1, b)).(*kmsg.ProduceResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := idem(onOther[1], "before"); code != 0 {
		t.Fatalf("idempotent batch before the new session: %v", kerr.ErrorForCode(code))
	}

	// ...and refused once the new session's InitProducerId (on the
	// coordinator) has bumped the epoch: the bump reaches the other
	// broker through the coordinator's fence file.
	fresh := c.client(kgo.TransactionalID("z"), kgo.DefaultProduceTopic(topic))
	if _, newEpoch, err := fresh.ProducerID(ctx); err != nil || newEpoch <= epoch {
		t.Fatalf("new session: epoch %d (zombie's %d), %v", newEpoch, epoch, err)
	}
	bumped := time.Now()
	var code int16
	brokertest.Eventually(t, 30*time.Second, "the zombie's idempotent batch refused on broker "+fmt.Sprint(other), func() bool {
		code = idem(onOther[2], "after")
		return code != 0
	})
	t.Logf("fence ring: zombie refused on broker %d %v after the bump on broker %d (%v)", other, time.Since(bumped).Round(time.Millisecond), coordinator, kerr.ErrorForCode(code))
	if code != kerr.InvalidProducerEpoch.Code && code != kerr.ProducerFenced.Code {
		t.Fatalf("zombie batch refused with %v, want a fencing error", kerr.ErrorForCode(code))
	}

	// The transactional zombie is fenced at once (its coordinator knows).
	err = zombie.ProduceSync(ctx, &kgo.Record{Partition: onOther[2], Value: []byte("z-2")}).FirstErr()
	if err == nil {
		err = zombie.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !strings.Contains(fmt.Sprint(err), "fenced") {
		t.Fatalf("transactional zombie: %v, want fenced", err)
	}
}
