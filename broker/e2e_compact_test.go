package broker_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker"
	"kaas/broker/brokertest"
	"kaas/broker/brokertest/loopback"
)

// compactedTopic creates a one-partition compacted topic with small
// segments, and makes the cleaner check every 50 ms (a dynamic broker
// config: no restart).
func compactedTopic(t *testing.T, addr, name string) {
	t.Helper()
	resp, err := brokertest.Admin(t, addr).AlterBrokerConfigs(brokertest.Context(t, 10*time.Second),
		[]kadm.AlterConfig{set("log.cleaner.backoff.ms", "50")})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("%v %v", err, resp[0].Err)
	}
	brokertest.CreateTopic(t, addr, name, 1, map[string]*string{
		"cleanup.policy":            kmsg.StringPtr("compact"),
		"internal.segment.bytes":    kmsg.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
		"delete.retention.ms":       kmsg.StringPtr("500"),
	})
}

// produced is what was acknowledged at an offset.
type produced struct {
	key, value string
	tombstone  bool
}

func produce(t *testing.T, cl *kgo.Client, topic, key string, value *string, at map[int64]produced) {
	t.Helper()
	r := &kgo.Record{Topic: topic, Key: []byte(key)}
	p := produced{key: key, tombstone: value == nil}
	if value != nil {
		r.Value, p.value = []byte(*value), *value
	}
	if err := cl.ProduceSync(brokertest.Context(t, 20*time.Second), r).FirstErr(); err != nil {
		t.Fatalf("producing %s: %v", key, err)
	}
	at[r.Offset] = p
}

// readTopic consumes partition 0 from the start up to its high watermark
// with a fresh consumer.
func readTopic(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ctx := brokertest.Context(t, 20*time.Second)
	ends, err := brokertest.Admin(t, addr).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := brokertest.Client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("fetching: %v", err)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// checkTable checks what a consumer reads: every record is the one
// acknowledged at its offset, and the table it builds is the latest
// value per key acknowledged.
func checkTable(t *testing.T, recs []*kgo.Record, at map[int64]produced) {
	t.Helper()
	want := map[string]string{}
	var offsets []int64
	for o := range at {
		offsets = append(offsets, o)
	}
	for i := range offsets {
		for j := i + 1; j < len(offsets); j++ {
			if offsets[j] < offsets[i] {
				offsets[i], offsets[j] = offsets[j], offsets[i]
			}
		}
	}
	for _, o := range offsets {
		if p := at[o]; p.tombstone {
			delete(want, p.key)
		} else {
			want[p.key] = p.value
		}
	}
	got := map[string]string{}
	for _, r := range recs {
		p, ok := at[r.Offset]
		if !ok || p.key != string(r.Key) || p.value != string(r.Value) || p.tombstone != (r.Value == nil) {
			t.Fatalf("offset %d holds %q=%q, acknowledged %+v", r.Offset, r.Key, r.Value, p)
		}
		if r.Value == nil {
			delete(got, string(r.Key))
		} else {
			got[string(r.Key)] = string(r.Value)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table read back %v, want %v", got, want)
	}
}

// TestCompactedTableReadBack: a table workload (keys updated many times,
// a tombstone) produced with franz-go and read back after the cleaner
// ran: exactly the latest value per key, at its original offset; the
// tombstoned key gone once delete.retention.ms passed.
func TestCompactedTableReadBack(t *testing.T) {
	b := brokertest.Start(t)
	compactedTopic(t, b.Addr(), "table")
	cl := brokertest.Client(t, b.Addr())
	at := map[int64]produced{}
	for i := 0; i < 300; i++ {
		v := fmt.Sprintf("value-%d-%s", i, "padding-padding")
		switch i {
		case 5:
			produce(t, cl, "table", "dead", &v, at)
		case 50:
			produce(t, cl, "table", "dead", nil, at)
		default:
			produce(t, cl, "table", "k"+strconv.Itoa(i%20), &v, at)
		}
	}
	var recs []*kgo.Record
	brokertest.Eventually(t, 30*time.Second, "the cleaner to leave about one record per key", func() bool {
		recs = readTopic(t, b.Addr(), "table")
		dead := false
		for _, r := range recs {
			dead = dead || string(r.Key) == "dead"
		}
		return len(recs) < 120 && !dead
	})
	checkTable(t, recs, at)

	// It survives a restart, and the topic takes writes after it.
	dir := b.DataDir()
	brokertest.Stop(t, b)
	b = brokertest.StartIn(t, dir)
	checkTable(t, readTopic(t, b.Addr(), "table"), at)
	cl = brokertest.Client(t, b.Addr())
	v := "after-restart"
	produce(t, cl, "table", "k1", &v, at)
	checkTable(t, readTopic(t, b.Addr(), "table"), at)
}

// TestIdempotentProducerAfterCleaningAndSIGKILL: an idempotent producer
// whose earlier batches the cleaner removed (and whose last batch it
// emptied, every record superseded) goes on producing after a SIGKILL of
// the broker (a real child process, no clean shutdown, no producer
// snapshot) with the same producer id and epoch: no
// UNKNOWN_PRODUCER_ID, no OUT_OF_ORDER_SEQUENCE_NUMBER, no duplicate.
func TestIdempotentProducerAfterCleaningAndSIGKILL(t *testing.T) {
	dir := t.TempDir()
	addr := loopback.FreeAddr(t)
	p := brokertest.Serve(t, dir, "--listen", addr)
	compactedTopic(t, addr, "table")
	idem := brokertest.Client(t, addr, kgo.DefaultProduceTopic("table"), kgo.RecordRetries(0))
	other := brokertest.Client(t, addr, kgo.DisableIdempotentWrite())
	at := map[int64]produced{}
	for i := 0; i < 40; i++ {
		v := fmt.Sprintf("idem-%d", i)
		produce(t, idem, "table", "k"+strconv.Itoa(i%4), &v, at)
	}
	ctx := brokertest.Context(t, 60*time.Second)
	pid, epoch, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Another producer supersedes every key, so the idempotent
	// producer's batches all go — its last one emptied, not removed.
	for i := 0; i < 200; i++ {
		v := fmt.Sprintf("other-%d-padding-padding", i)
		produce(t, other, "table", "k"+strconv.Itoa(i%4), &v, at)
	}
	brokertest.Eventually(t, 30*time.Second, "the idempotent producer's records to be cleaned away", func() bool {
		for _, r := range readTopic(t, addr, "table") {
			if len(r.Value) > 5 && string(r.Value[:5]) == "idem-" {
				return false
			}
		}
		return true
	})
	checkTable(t, readTopic(t, addr, "table"), at)

	p.Kill()
	brokertest.Serve(t, dir, "--listen", addr) // killed when the test ends
	checkTable(t, readTopic(t, addr, "table"), at)
	for i := 0; i < 10; i++ {
		v := fmt.Sprintf("idem-after-%d", i)
		produce(t, idem, "table", "k"+strconv.Itoa(i%4), &v, at)
	}
	pid2, epoch2, err := idem.ProducerID(ctx)
	if err != nil || pid2 != pid || epoch2 != epoch {
		t.Fatalf("producer id/epoch %d/%d after the restart, was %d/%d (%v): its state was lost", pid2, epoch2, pid, epoch, err)
	}
	// DescribeProducers agrees: its last sequence went on from 39.
	resp, err := brokertest.Admin(t, addr).DescribeProducers(ctx, kadm.TopicsSet{"table": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	resp.EachProducer(func(s kadm.DescribedProducer) {
		if s.ProducerID == pid {
			found = true
			if s.LastSequence != 49 {
				t.Errorf("last sequence %d, want 49", s.LastSequence)
			}
		}
	})
	if !found {
		t.Fatal("the idempotent producer is unknown to the partition")
	}
	checkTable(t, readTopic(t, addr, "table"), at)
}

// TestCompactedTopicWithTransactions: committed and aborted transactions
// interleaved on a compacted topic. Cleaning removes the aborted records
// (so even a read_uncommitted consumer no longer sees them) and keeps the
// committed ones' latest values; read_committed never sees aborted data,
// before or after; the transactional producer goes on after cleaning.
func TestCompactedTopicWithTransactions(t *testing.T) {
	b := brokertest.Start(t)
	compactedTopic(t, b.Addr(), "txtable")
	txn := brokertest.Client(t, b.Addr(), kgo.TransactionalID("compact-txn"), kgo.DefaultProduceTopic("txtable"))
	other := brokertest.Client(t, b.Addr(), kgo.DisableIdempotentWrite())
	ctx := brokertest.Context(t, 60*time.Second)
	committed := map[string]string{}
	for i := 0; i < 12; i++ {
		commit := i%3 != 1
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			v := fmt.Sprintf("txn-%d-%v", i, commit)
			key := "t" + strconv.Itoa(k)
			if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				committed[key] = v
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(level kgo.IsolationLevel) []*kgo.Record {
		ends, err := brokertest.Admin(t, b.Addr()).ListEndOffsets(ctx, "txtable")
		if err != nil {
			t.Fatal(err)
		}
		end, _ := ends.Lookup("txtable", 0)
		cl := brokertest.Client(t, b.Addr(), kgo.ConsumeTopics("txtable"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
		defer cl.Close()
		var out []*kgo.Record
		for {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			out = append(out, fs.Records()...)
			// The log ends with a record, or with a commit marker right
			// after one.
			if len(out) > 0 && out[len(out)-1].Offset >= end.Offset-2 {
				return out
			}
		}
	}
	noAborted := func(recs []*kgo.Record, what string) map[string]string {
		t.Helper()
		table := map[string]string{}
		for _, r := range recs {
			if strings.HasSuffix(string(r.Value), "-false") {
				t.Fatalf("%s consumer saw aborted record %s=%s at %d", what, r.Key, r.Value, r.Offset)
			}
			if strings.HasPrefix(string(r.Key), "t") {
				table[string(r.Key)] = string(r.Value)
			}
		}
		return table
	}
	noAborted(read(kgo.ReadCommitted()), "read_committed (before cleaning)")
	for i := 0; i < 150; i++ {
		v := fmt.Sprintf("filler-%d-padding-padding", i)
		if err := other.ProduceSync(ctx, &kgo.Record{Topic: "txtable", Key: []byte("f" + strconv.Itoa(i%5)), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	brokertest.Eventually(t, 30*time.Second, "the aborted records to be cleaned away", func() bool {
		for _, r := range read(kgo.ReadUncommitted()) {
			if strings.HasSuffix(string(r.Value), "-false") {
				return false
			}
		}
		return true
	})
	for _, level := range []struct {
		l    kgo.IsolationLevel
		name string
	}{{kgo.ReadCommitted(), "read_committed"}, {kgo.ReadUncommitted(), "read_uncommitted"}} {
		if got := noAborted(read(level.l), level.name); fmt.Sprint(got) != fmt.Sprint(committed) {
			t.Fatalf("%s table %v, want %v", level.name, got, committed)
		}
	}
	// The transactional producer goes on.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte("t0"), Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce after cleaning: %v", err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit after cleaning: %v", err)
	}
}

// TestCompactedTopicObservable: the cleaner's work shows on /metrics and
// in the inspector's partition view.
func TestCompactedTopicObservable(t *testing.T) {
	b := brokertest.Start(t, brokertest.WithConfig(func(c *broker.Config) { c.AdminAddr = "127.0.0.1:0" }))
	compactedTopic(t, b.Addr(), "seen")
	cl := brokertest.Client(t, b.Addr())
	at := map[int64]produced{}
	for i := 0; i < 200; i++ {
		v := fmt.Sprintf("value-%d-padding-padding", i)
		produce(t, cl, "seen", "k"+strconv.Itoa(i%5), &v, at)
	}
	brokertest.Eventually(t, 30*time.Second, "a cleaner pass counted", func() bool {
		return metric(t, b, "kaas_log_cleaner_passes_total") >= 1
	})
	if metric(t, b, "kaas_log_cleaner_records_removed_total") < 1 || metric(t, b, "kaas_log_cleaner_bytes_read_total") < 1 ||
		metric(t, b, "kaas_log_cleaner_partitions") != 1 || metric(t, b, "kaas_log_cleaner_uncleanable_partitions") != 0 {
		t.Fatal("cleaner metrics do not show the pass")
	}
	// Apache's gauges over the last pass of each thread: the pass took
	// some time and some of its map, rewrote less than it read (five keys
	// left of 200 records), and no thread died.
	if util := metric(t, b, "kaas_log_cleaner_max_buffer_utilization_ratio"); util <= 0 || util > 1 {
		t.Fatalf("buffer utilization %v, want in (0, 1]", util)
	}
	if recopy := metric(t, b, "kaas_log_cleaner_recopy_ratio"); recopy <= 0 || recopy >= 1 {
		t.Fatalf("recopy ratio %v, want in (0, 1)", recopy)
	}
	if metric(t, b, "kaas_log_cleaner_max_clean_time_seconds") <= 0 || metric(t, b, "kaas_log_cleaner_max_compaction_delay_seconds") != 0 ||
		metric(t, b, "kaas_log_cleaner_dead_threads") != 0 {
		t.Fatal("clean time, compaction delay (no max.compaction.lag.ms set) or dead threads wrong")
	}
	var d struct {
		State struct {
			Cleaner *struct {
				CleanedTo int64 `json:"cleaned_to"`
				Passes    int   `json:"passes"`
			} `json:"cleaner"`
		} `json:"state"`
	}
	getJSON(t, "http://"+b.AdminAddr()+"/api/actors/partition/seen-0", &d)
	if d.State.Cleaner == nil || d.State.Cleaner.Passes < 1 || d.State.Cleaner.CleanedTo <= 0 {
		t.Fatalf("inspector's cleaner state %+v", d.State.Cleaner)
	}
}

// TestCompactedTopicCommittedOffsetInCleanedRange: a group's committed
// offset points at a record the cleaner then removed; the group resumes
// there (no OFFSET_OUT_OF_RANGE, no reset) and reads on from the next
// record kept.
func TestCompactedTopicCommittedOffsetInCleanedRange(t *testing.T) {
	b := brokertest.Start(t)
	compactedTopic(t, b.Addr(), "grouped")
	cl := brokertest.Client(t, b.Addr())
	at := map[int64]produced{}
	for i := 0; i < 200; i++ {
		v := fmt.Sprintf("value-%d-padding-padding", i)
		produce(t, cl, "grouped", "k"+strconv.Itoa(i%5), &v, at)
	}
	ctx := brokertest.Context(t, 30*time.Second)
	adm := brokertest.Admin(t, b.Addr())
	// Offset 10 holds k0's value 10, superseded at 15.
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "grouped", Partition: 0, At: 10, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, "readers", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	brokertest.Eventually(t, 30*time.Second, "offset 10 cleaned away", func() bool {
		for _, r := range readTopic(t, b.Addr(), "grouped") {
			if r.Offset == 10 {
				return false
			}
		}
		return true
	})
	g := brokertest.Client(t, b.Addr(), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("grouped"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.DisableAutoCommit())
	fs := g.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) == 0 || recs[0].Offset <= 10 || recs[0].Offset >= 199 {
		t.Fatalf("the group resumed at %v, want the first record kept after offset 10 (not a reset to the end)", recs)
	}
}
