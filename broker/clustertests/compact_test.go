package clustertests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
)

// TestClusterCompactedOwnerChange: an idempotent producer whose batches
// the cleaner removed (its last one emptied) goes on producing, with the
// same producer id and epoch, after its partition's owner is SIGKILLed
// and another broker takes the partition over and recovers its producer
// state from the cleaned log; the table reads back the same.
func TestClusterCompactedOwnerChange(t *testing.T) {
	c := newCluster(t, 3)
	adm := c.admin()
	ctx := brokertest.Context(t, 2*time.Minute)
	for id := range c.brokers {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kmsg.StringPtr("50")}}, id)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("broker %d: %v %v", id, err, resp[0].Err)
		}
	}
	const topic = "table"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": kmsg.StringPtr("compact"), "internal.segment.bytes": kmsg.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	c.leaders(topic, 1)
	idem := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	other := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	want := map[string]string{}
	produce := func(cl *kgo.Client, key, value string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatalf("producing %s=%s: %v", key, value, err)
		}
		want[key] = value
	}
	for i := 0; i < 40; i++ {
		produce(idem, "k"+strconv.Itoa(i%4), fmt.Sprintf("idem-%d", i))
	}
	pid, epoch, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		produce(other, "k"+strconv.Itoa(i%4), fmt.Sprintf("other-%d-padding-padding", i))
	}
	table := func() (map[string]string, bool) {
		ends := c.endOffsets(topic)
		cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		got, idemLeft, last := map[string]string{}, false, int64(-1)
		for last < ends[0]-1 {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				got[string(r.Key)] = string(r.Value)
				idemLeft = idemLeft || len(r.Value) > 5 && string(r.Value[:5]) == "idem-"
				last = r.Offset
			})
		}
		return got, idemLeft
	}
	brokertest.Eventually(t, 60*time.Second, "the idempotent producer's records cleaned away", func() bool {
		_, left := table()
		return !left
	})
	owner := c.leaders(topic, 1)[0][0]
	c.brokers[owner].proc.Kill()
	c.waitMembers(2, owner)
	if next := c.leaders(topic, 1, owner)[0][0]; next == owner {
		t.Fatal("the partition did not move")
	}
	for i := 0; i < 8; i++ {
		produce(idem, "k"+strconv.Itoa(i%4), fmt.Sprintf("idem-after-%d", i))
	}
	if pid2, epoch2, err := idem.ProducerID(ctx); err != nil || pid2 != pid || epoch2 != epoch {
		t.Fatalf("producer %d/%d after the owner change, was %d/%d (%v)", pid2, epoch2, pid, epoch, err)
	}
	if got, _ := table(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("table %v, want %v", got, want)
	}
}

// TestClusterCompactedTransactionalOwnerChange: a transactional producer
// commits (and aborts) transactions on a compacted topic, another
// producer supersedes every key so the cleaner removes its batches (the
// aborted ones as aborted data, its last batch emptied); its partition's
// owner is SIGKILLed and another broker recovers the partition from the
// cleaned log. The producer goes on with the same producer id and epoch
// — its next transactions commit, no UNKNOWN_PRODUCER_ID, no
// OUT_OF_ORDER_SEQUENCE_NUMBER — and read_committed reads exactly the
// latest committed value per key.
func TestClusterCompactedTransactionalOwnerChange(t *testing.T) {
	c := newCluster(t, 3)
	adm := c.admin()
	ctx := brokertest.Context(t, 2*time.Minute)
	for id := range c.brokers {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kmsg.StringPtr("50")}}, id)
		if err != nil || resp[0].Err != nil {
			t.Fatalf("broker %d: %v %v", id, err, resp[0].Err)
		}
	}
	const topic = "txtable"
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": kmsg.StringPtr("compact"), "internal.segment.bytes": kmsg.StringPtr("2048"),
		"min.cleanable.dirty.ratio": kmsg.StringPtr("0.01"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	c.leaders(topic, 1)
	txn := c.client(kgo.TransactionalID("compact-owner"), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	other := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.DisableIdempotentWrite())
	want := map[string]string{}
	round := func(prefix string, i int, commit bool) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		staged := map[string]string{}
		for k := 0; k < 3; k++ {
			key, v := "k"+strconv.Itoa(k), fmt.Sprintf("%s-%d-%v", prefix, i, commit)
			if err := txn.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("%s produce %d: %v", prefix, i, err)
			}
			staged[key] = v
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("%s end %d (commit %v): %v", prefix, i, commit, err)
		}
		if commit {
			for k, v := range staged {
				want[k] = v
			}
		}
	}
	for i := 0; i < 9; i++ {
		round("txn", i, i%3 != 1)
	}
	pid, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		key, v := "k"+strconv.Itoa(i%3), fmt.Sprintf("other-%d-padding-padding", i)
		if err := other.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		want[key] = v
	}
	// read returns the table at level, and whether any record of the
	// transactional producer is left.
	read := func(level kgo.IsolationLevel, committed bool) (map[string]string, bool) {
		ends := c.endOffsets(topic)
		cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
		defer cl.Close()
		got, txnLeft, last := map[string]string{}, false, int64(-1)
		// The log ends with a record, or with a commit marker right after one.
		for last < ends[0]-2 {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if committed && strings.HasSuffix(string(r.Value), "-false") {
					t.Fatalf("aborted record %s=%s at %d read", r.Key, r.Value, r.Offset)
				}
				got[string(r.Key)] = string(r.Value)
				txnLeft = txnLeft || strings.HasPrefix(string(r.Value), "txn-")
				last = r.Offset
			})
		}
		return got, txnLeft
	}
	brokertest.Eventually(t, 60*time.Second, "the transactional producer's records cleaned away", func() bool {
		_, left := read(kgo.ReadUncommitted(), false)
		return !left
	})
	owner := c.leaders(topic, 1)[0][0]
	c.brokers[owner].proc.Kill()
	c.waitMembers(2, owner)
	if next := c.leaders(topic, 1, owner)[0][0]; next == owner {
		t.Fatal("the partition did not move")
	}
	for i := 0; i < 3; i++ {
		round("after", i, i != 1)
	}
	// Transaction version 2 (KIP-890) bumps the epoch at every EndTxn:
	// 9 rounds from epoch 0 took it to 9, 3 more take it to 12. Any
	// other epoch is a bump the owner change caused.
	perRound := epoch / 9
	if pid2, epoch2, err := txn.ProducerID(ctx); err != nil || pid2 != pid || epoch2 != epoch+3*perRound {
		t.Fatalf("producer %d/%d after the owner change, was %d/%d (%v); want the same id at epoch %d", pid2, epoch2, pid, epoch, err, epoch+3*perRound)
	}
	if got, _ := read(kgo.ReadCommitted(), true); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed table %v, want %v", got, want)
	}
}
