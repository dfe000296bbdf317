package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// DescribeTransactions, ListTransactions and DescribeProducers show an open
// transaction, then the KIP-360 fence on every partition the producer used.
func TestDescribeTransactionsAndProducersThroughKadm(t *testing.T) {
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "desc", 2)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, b))

	p := txnProducer(t, b, "desc-txn", "desc")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, p, 0, "x", "y"); err != nil {
		t.Fatal(err)
	}
	pid, epoch, _ := p.ProducerID(ctx)

	txns, err := adm.DescribeTransactions(ctx, "desc-txn", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	d := txns["desc-txn"]
	if d.Err != nil || d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch != epoch || len(d.Topics["desc"]) != 1 {
		t.Fatalf("described %+v", d)
	}
	if err := txns["nobody"].Err; err != kerr.TransactionalIDNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed["desc-txn"]; !ok || l.ProducerID != pid {
		t.Fatalf("ListTransactions(Ongoing) = %v", listed)
	}

	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"desc": {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	dp, ok := producers["desc"].Partitions[0].ActiveProducers[pid]
	if !ok || dp.ProducerEpoch != epoch || dp.LastSequence != 1 || dp.CurrentTxnStartOffset != 0 {
		t.Fatalf("producer on desc-0: %+v %v", dp, ok)
	}

	// A new session aborts the transaction and fences the old epoch.
	cur := txnProducer(t, b, "desc-txn", "desc")
	if err := cur.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	_, newEpoch, _ := cur.ProducerID(ctx)
	if newEpoch != epoch+2 {
		t.Fatalf("new session epoch %d, want %d", newEpoch, epoch+2)
	}
	producers, err = adm.DescribeProducers(ctx, kadm.TopicsSet{"desc": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if dp := producers["desc"].Partitions[0].ActiveProducers[pid]; dp.ProducerEpoch != newEpoch || dp.CurrentTxnStartOffset != -1 {
		t.Fatalf("after the rejoin desc-0 shows %+v, want epoch %d and no open transaction", dp, newEpoch)
	}
}
