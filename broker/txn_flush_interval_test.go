package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"kaas/model/txnstate"
)

// TestFlushIntervalCoversCoordinatorLogs: with --flush-interval-ms the
// coordinators' slot logs follow the partitions, as Apache's
// log.flush.interval.ms covers __transaction_state and __consumer_offsets:
// transactions commit and offsets are committed without waiting for any
// fsync of a transaction or offsets slot (an hour's interval: none runs
// before the stop), and a clean stop still makes everything durable — a
// broker restarted on the same directory has every transaction complete,
// its records readable read_committed and the group's offset.
func TestFlushIntervalCoversCoordinatorLogs(t *testing.T) {
	dir := t.TempDir()
	hour := func(c *Config) { c.FlushInterval = time.Hour }
	b := startTxnBroker(t, dir, hour)
	createTopic(t, b, "fi", 2)
	ctx := testCtx(t)
	p := txnProducer(t, b, "fi-txn", "fi")
	var want []string
	for i := 0; i < 20; i++ {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := fmt.Sprintf("v%02d", i)
		if err := produceIn(t, ctx, p, int32(i%2), v); err != nil {
			t.Fatal(err)
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		want = append(want, v)
	}
	p.Close()
	adm := kadm.NewClient(newClient(t, b))
	if err := adm.CommitAllOffsets(ctx, "fi-group", kadm.Offsets{"fi": {0: {At: 7}}}); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]prometheus.Histogram{"transaction": b.metrics.TxnLogFsyncDuration, "offsets": b.metrics.OffsetsFsyncDuration} {
		if n := sampleCount(t, h); n != 0 {
			t.Fatalf("%d fsyncs of %s slot logs before any interval passed; want the answers not to wait for one", n, name)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}

	b2 := startTxnBroker(t, dir, hour)
	waitForEntry(t, b2, "fi-txn", func(e txnstate.Entry) bool { return e.State == txnstate.CompleteCommit })
	if got := consumeAll(t, b2, "fi", kgo.ReadCommitted()); fmt.Sprint(sorted(got)) != fmt.Sprint(want) {
		t.Fatalf("read_committed after the restart: %v, want %v", got, want)
	}
	offs, err := kadm.NewClient(newClient(t, b2)).FetchOffsets(ctx, "fi-group")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("fi", 0); !ok || o.At != 7 {
		t.Fatalf("group offset after the restart: %+v (found %v), want 7", o, ok)
	}
}

func sampleCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
