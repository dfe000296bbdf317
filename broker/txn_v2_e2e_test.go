package broker

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"kaas/model/txnstate"
)

// requestsAt counts the requests the broker answered for api at version.
func requestsAt(b *Broker, api string, version int) float64 {
	return testutil.ToFloat64(b.Metrics().Requests.WithLabelValues(api, fmt.Sprint(version)))
}

// tv1Versions caps a franz-go client below transaction version 2 (Produce
// v11, EndTxn v4, TxnOffsetCommit v4): it runs the classic protocol.
func tv1Versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(0, 11)
	v.SetMaxKeyVersion(26, 4)
	v.SetMaxKeyVersion(28, 4)
	return v
}

// runTxns commits n transactions of two records (one per partition) and
// aborts one in the middle; it returns the committed values.
func runTxns(t *testing.T, ctx context.Context, cl *kgo.Client, name string, n int) []string {
	t.Helper()
	var committed []string
	for i := range n {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("%s: begin: %v", name, err)
		}
		vals := []string{fmt.Sprintf("%s-%d-a", name, i), fmt.Sprintf("%s-%d-b", name, i)}
		for p, v := range vals {
			if err := produceIn(t, ctx, cl, int32(p), v); err != nil {
				t.Fatalf("%s: produce: %v", name, err)
			}
		}
		commit := kgo.TryCommit
		if i == n/2 {
			commit = kgo.TryAbort
		} else {
			committed = append(committed, vals...)
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("%s: end %d: %v", name, i, err)
		}
	}
	return committed
}

// TestTV2AndTV1ClientsOnOneBroker (R-FEA-1, R-TV2-1..5): franz-go opts
// into transaction version 2 on a broker that finalizes it (Produce v12,
// EndTxn v5, no AddPartitionsToTxn) and its epoch rises at every end; a
// franz-go client capped below the TV2 versions runs the classic protocol
// on the same broker at the same time, its epoch unchanged. Both see only
// their committed records under read_committed.
func TestTV2AndTV1ClientsOnOneBroker(t *testing.T) {
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "tv2", 2)
	createTopic(t, b, "tv1", 2)
	ctx := testCtx(t)
	const n = 5
	v2 := txnProducer(t, b, "tv2-producer", "tv2")
	v1 := txnProducer(t, b, "tv1-producer", "tv1", kgo.MaxVersions(tv1Versions()))
	done := make(chan []string)
	go func() { done <- runTxns(t, ctx, v1, "tv1", n) }()
	want2 := runTxns(t, ctx, v2, "tv2", n)
	want1 := <-done

	if got := requestsAt(b, "EndTxn", 5); got != n {
		t.Errorf("EndTxn v5 answered %v times, want %d (the TV2 client's ends)", got, n)
	}
	if got := requestsAt(b, "EndTxn", 4); got != n {
		t.Errorf("EndTxn v4 answered %v times, want %d (the TV1 client's ends)", got, n)
	}
	if got := requestsAt(b, "Produce", 12); got < 2*n {
		t.Errorf("Produce v12 answered %v times, want at least %d", got, 2*n)
	}
	if got := requestsAt(b, "Produce", 11); got < 2*n {
		t.Errorf("Produce v11 answered %v times, want at least %d", got, 2*n)
	}
	var adds float64
	for v := range 4 {
		adds += requestsAt(b, "AddPartitionsToTxn", v)
	}
	if adds == 0 {
		t.Error("no AddPartitionsToTxn from the TV1 client")
	}
	if adds > n*2 {
		t.Errorf("AddPartitionsToTxn answered %v times: the TV2 client sent some too", adds)
	}

	// DescribeTransactions answers from the durable entries; nothing
	// waits for Complete* to be durable (state/txncoord's complete).
	adm := kadm.NewClient(newClient(t, b))
	eventually(t, "both transactional ids described CompleteCommit with their epochs", func() bool {
		described, err := adm.DescribeTransactions(ctx, "tv2-producer", "tv1-producer")
		if err != nil {
			t.Fatal(err)
		}
		d2, d1 := described["tv2-producer"], described["tv1-producer"]
		return d2.ProducerEpoch == n && d2.State == "CompleteCommit" && d1.ProducerEpoch == 0 && d1.State == "CompleteCommit"
	})
	for topic, want := range map[string][]string{"tv2": want2, "tv1": want1} {
		got := consumeAll(t, b, topic, kgo.ReadCommitted())
		sort.Strings(got)
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s read_committed: %v, want %v", topic, got, want)
		}
	}
}

// TestTV1FinalizedKeepsFranzGoClassic (R-FEA-1): with transaction.version
// finalized at 1, franz-go does not opt in (EndTxn v4, AddPartitionsToTxn).
func TestTV1FinalizedKeepsFranzGoClassic(t *testing.T) {
	b := startTxnBroker(t, t.TempDir(), func(c *Config) { c.TransactionVersion = 1 })
	createTopic(t, b, "classic", 2)
	ctx := testCtx(t)
	cl := txnProducer(t, b, "classic-producer", "classic")
	runTxns(t, ctx, cl, "classic", 3)
	if v5, v4 := requestsAt(b, "EndTxn", 5), requestsAt(b, "EndTxn", 4); v5 != 0 || v4 != 3 {
		t.Errorf("EndTxn v5 %v times, v4 %v times; want 0 and 3", v5, v4)
	}
}

// TestTV2FranzGoGoesOnThroughARotation (R-TV2-3): a franz-go TV2
// producer's commits alone exhaust the epoch; the commit at 32766 rotates
// the producer id and the client goes on with the new one. The entry is
// seeded at epoch 32764 instead of 32 764 real commits (InitProducerId
// then bumps it to 32765).
func TestTV2FranzGoGoesOnThroughARotation(t *testing.T) {
	dir := t.TempDir()
	const id, old = "rotating", int64(4242)
	seedEntries(t, dir, txnstate.Entry{TransactionalID: id, ProducerID: old, Epoch: 32764, LastProducerID: old, LastEpoch: 32763,
		TimeoutMs: 60000, State: txnstate.CompleteCommit, TxnStartMs: -1, LastUpdateMs: time.Now().UnixMilli(), TV: 2})
	b := startTxnBroker(t, dir)
	createTopic(t, b, "rot", 2)
	ctx := testCtx(t)
	cl := txnProducer(t, b, id, "rot")
	var want []string
	var ids []string
	for i := range 4 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("rot-%d", i)
		if err := produceIn(t, ctx, cl, int32(i%2), v); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %s: %v", v, err)
		}
		want = append(want, v)
		pid, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, fmt.Sprintf("%v/%d", pid == old, epoch))
	}
	// After InitProducerId (32765): commits give 32766, then the
	// rotation (new id, 0), then 1 and 2 on the new id.
	if fmt.Sprint(ids) != "[true/32766 false/0 false/1 false/2]" {
		t.Fatalf("(old id?, epoch) after each commit: %v", ids)
	}
	got := consumeAll(t, b, "rot", kgo.ReadCommitted())
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
}

// TestTV2DowngradeRefusedWhileOpen (R-FEA-2): transaction.version cannot
// go below 2 while a TV2 transaction is open; once it is committed the
// downgrade is applied, and a new franz-go client then runs TV1.
func TestTV2DowngradeRefusedWhileOpen(t *testing.T) {
	b := startTxnBroker(t, t.TempDir())
	createTopic(t, b, "down", 2)
	ctx := testCtx(t)
	cl := txnProducer(t, b, "down-producer", "down")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := produceIn(t, ctx, cl, 0, "open"); err != nil {
		t.Fatal(err)
	}
	adm := newClient(t, b)
	downgrade := func() *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
		u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", 1, 2
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		resp, err := req.RequestWith(ctx, adm)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := downgrade(); r.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("downgrade with a TV2 transaction open: %v, want INVALID_UPDATE_VERSION", kerr.ErrorForCode(r.ErrorCode))
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The entry is Complete* once its write is durable (nothing waits).
	eventually(t, "the downgrade applied once the transaction is committed", func() bool {
		return downgrade().ErrorCode == 0
	})
	before := requestsAt(b, "EndTxn", 4)
	fresh := txnProducer(t, b, "down-producer-2", "down")
	runTxns(t, ctx, fresh, "after", 2)
	if got := requestsAt(b, "EndTxn", 4) - before; got != 2 {
		t.Errorf("after the downgrade a new client ended %v transactions with EndTxn v4, want 2", got)
	}
}
