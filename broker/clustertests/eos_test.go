package clustertests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/broker/brokertest"
)

// Consume-transform-produce across brokers: a franz-go
// GroupTransactSession reads "in" (partitions led by all three brokers)
// and writes every record to "out" (likewise), committing the read
// offsets in the same transaction (TxnOffsetCommit to the group
// coordinator, markers to every leader). The group is picked so that its
// coordinator is not the transaction's: the group coordinator verifies
// each TxnOffsetCommit with the transaction coordinator, which writes the
// group's markers to it as WriteTxnMarkers for __consumer_offsets, as
// Apache's brokers do. read_committed sees each input exactly once in the
// output, and the group's committed offsets are the input's ends.
func TestClusterConsumeTransformProduce(t *testing.T) {
	c := newCluster(t, 3)
	const parts, total = 6, 300
	c.createTopic("in", parts)
	c.createTopic("out", parts)
	c.leaders("in", parts)
	c.leaders("out", parts)
	ctx := brokertest.Context(t, 2*time.Minute)
	prod := c.client(kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(0))
	for i := 0; i < total; i++ {
		prod.Produce(ctx, kgo.StringRecord(fmt.Sprintf("in-%d", i)), func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ends := c.endOffsets("in")
	txnCoordinator := c.coordinatorOf("ctp-cluster")
	group := ""
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("ctp-group-%d", i); c.groupCoordinatorOf(g) != txnCoordinator {
			group = g
		}
	}

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(c.seeds()...),
		kgo.TransactionalID("ctp-cluster"),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics("in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxPartitionBytes(1), // a batch per partition per fetch: many transactions
	)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	adm := c.admin()
	done := func() bool {
		got, err := adm.FetchOffsets(brokertest.Context(t, 5*time.Second), group)
		if err != nil || got.Error() != nil {
			return false
		}
		for p, end := range ends {
			if o, ok := got.Lookup("in", p); end > 0 && (!ok || o.At != end) {
				return false
			}
		}
		return true
	}
	transactions := 0
	brokertest.Eventually(t, 90*time.Second, "every input committed through the session", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := sess.PollFetches(pctx)
		cancel()
		if len(fetches.Records()) == 0 {
			return done()
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Topic: "out", Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Logf("produce to out: %v (the transaction aborts and the input is read again)", err)
				}
			})
		})
		ok, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end: %v", err)
		} else if ok {
			transactions++
		}
		return false
	})
	seen := map[string]int{}
	cons := c.client(kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	brokertest.Eventually(t, 60*time.Second, "every input in the output", func() bool {
		cons.PollFetches(brokertest.Context(t, 2*time.Second)).EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
		return len(seen) >= total
	})
	for i := 0; i < total; i++ {
		if v := fmt.Sprintf("in-%d", i); seen[v] != 1 {
			t.Errorf("%s in the output %d times", v, seen[v])
		}
	}
	t.Logf("%d inputs through %d committed transactions, each once in the output", total, transactions)

	// franz-go ran transaction version 2 (R-TV2-6): TxnOffsetCommit v5 at
	// the group coordinator, which added the offsets partition at the
	// transaction's coordinator (AddPartitionsToTxn v5), and no
	// AddOffsetsToTxn.
	groupCoordinator := c.groupCoordinatorOf(group)
	if v := metricValue(string(c.adminGet(groupCoordinator, "/metrics")), `kaas_requests_total{api="TxnOffsetCommit",version="5"}`); v < float64(transactions) {
		t.Errorf("group coordinator %d answered TxnOffsetCommit v5 %v times, want at least %d", groupCoordinator, v, transactions)
	}
	tm := string(c.adminGet(txnCoordinator, "/metrics"))
	if v := metricValue(tm, `kaas_requests_total{api="AddPartitionsToTxn",version="5"}`); v == 0 {
		t.Errorf("transaction coordinator %d answered no AddPartitionsToTxn v5", txnCoordinator)
	}
	if v := metricValue(tm, `kaas_requests_total{api="EndTxn",version="5"}`); v < float64(transactions) {
		t.Errorf("transaction coordinator %d answered EndTxn v5 %v times, want at least %d", txnCoordinator, v, transactions)
	}
	if strings.Contains(tm, `api="AddOffsetsToTxn"`) {
		t.Errorf("transaction coordinator %d was sent AddOffsetsToTxn under TV2", txnCoordinator)
	}
}
