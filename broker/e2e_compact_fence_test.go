package broker_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"kaas/broker/brokertest"
	"kaas/broker/brokertest/loopback"
	"kaas/storage/partlog/batchtest"
)

// TestCompactedZombieFencedWhetherCleanedOrNot: KIP-360's fencing does
// not depend on the zombie's batches still being in the log. A
// transactional producer writes to two compacted topics; on "cleaned"
// another producer supersedes every key so the cleaner removes the
// zombie's batches (its last one emptied), on "kept" nothing supersedes
// them. A new session of the same transactional.id bumps the epoch and
// commits to both, its own batches on "cleaned" cleaned away in turn.
// The zombie's batches at the old epoch are refused on both — and again
// after a SIGKILL of the broker (a real child process), when every
// partition's producer state is rebuilt from its cleaned log.
func TestCompactedZombieFencedWhetherCleanedOrNot(t *testing.T) {
	dir := t.TempDir()
	addr := loopback.FreeAddr(t)
	p := brokertest.Serve(t, dir, "--listen", addr)
	compactedTopic(t, addr, "cleaned")
	compactedTopic(t, addr, "kept")
	ctx := brokertest.Context(t, 90*time.Second)

	txnRound := func(cl *kgo.Client, prefix string, i int) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		v := []byte(fmt.Sprintf("%s-%d", prefix, i))
		for _, r := range []*kgo.Record{
			{Topic: "cleaned", Key: []byte("k" + strconv.Itoa(i%2)), Value: v},
			{Topic: "kept", Key: []byte(prefix + strconv.Itoa(i)), Value: v},
		} {
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("%s produce %d: %v", prefix, i, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("%s commit %d: %v", prefix, i, err)
		}
	}
	// supersede overwrites "cleaned"'s keys until none of prefix's
	// records is left there.
	other := brokertest.Client(t, addr, kgo.DisableIdempotentWrite())
	supersede := func(prefix string) {
		t.Helper()
		for i := 0; i < 150; i++ {
			v := fmt.Sprintf("other-%d-padding-padding", i)
			if err := other.ProduceSync(ctx, &kgo.Record{Topic: "cleaned", Key: []byte("k" + strconv.Itoa(i%2)), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		brokertest.Eventually(t, 30*time.Second, prefix+"'s records on \"cleaned\" cleaned away", func() bool {
			for _, r := range readTopic(t, addr, "cleaned") {
				if strings.HasPrefix(string(r.Value), prefix+"-") {
					return false
				}
			}
			return true
		})
	}

	zombie := brokertest.Client(t, addr, kgo.TransactionalID("z"))
	for i := 0; i < 4; i++ {
		txnRound(zombie, "zombie", i)
	}
	pid, epoch, err := zombie.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	supersede("zombie")

	fresh := brokertest.Client(t, addr, kgo.TransactionalID("z"))
	if pid2, epoch2, err := fresh.ProducerID(ctx); err != nil || pid2 != pid || epoch2 <= epoch {
		t.Fatalf("new session: producer %d/%d, zombie's %d/%d (%v): want the same id at a bumped epoch", pid2, epoch2, pid, epoch, err)
	}
	txnRound(fresh, "fresh", 0)
	supersede("fresh")

	// The zombie's next batch on each topic (keyed, its next sequence:
	// only its epoch is wrong) must be fenced.
	refused := func(when string) {
		t.Helper()
		raw := brokertest.Dial(t, addr)
		defer raw.Close()
		for _, topic := range []string{"cleaned", "kept"} {
			b := batchtest.Build(batchtest.Opts{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 4,
				Timestamp: time.Now().UnixMilli(), Keys: []string{"k0"}}, "zombie-late")
			resp := raw.RoundTrip(brokertest.ProduceRequest(topic, 0, -1, b)).(*kmsg.ProduceResponse)
			code := resp.Topics[0].Partitions[0].ErrorCode
			if code != kerr.InvalidProducerEpoch.Code && code != kerr.ProducerFenced.Code {
				t.Fatalf("%s: the zombie's batch on %q got %v, want INVALID_PRODUCER_EPOCH or PRODUCER_FENCED", when, topic, kerr.ErrorForCode(code))
			}
		}
	}
	refused("before the restart")
	if err := zombie.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err = zombie.ProduceSync(ctx, &kgo.Record{Topic: "kept", Key: []byte("late"), Value: []byte("zombie-late")}).FirstErr()
	if err == nil {
		err = zombie.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) && !strings.Contains(fmt.Sprint(err), "fenced") {
		t.Fatalf("the transactional zombie: %v, want fenced", err)
	}

	p.Kill()
	brokertest.Serve(t, dir, "--listen", addr) // killed when the test ends
	refused("after a SIGKILL, producer state rebuilt from the cleaned log")
	// A plain record last, so that the log ends with a record (not a
	// marker) for readTopic.
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: "kept", Key: []byte("end"), Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range readTopic(t, addr, "kept") {
		if string(r.Value) == "zombie-late" {
			t.Fatalf("a zombie's record is in the log at %d", r.Offset)
		}
	}
	// The live session goes on.
	txnRound(fresh, "fresh", 1)
}
