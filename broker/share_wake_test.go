package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareWakeMaxWait is the MaxWait of the waiting fetches below: far past
// anything the test waits for, so a fetch that comes back with records
// was woken, and one that was not comes back empty at the end of it.
const shareWakeMaxWait = 20_000

// startShareWakeBroker starts a broker whose share-partitions hold at
// most 10 records in flight, with lock (the record lock duration), a
// session timeout far past the test (a member's session expiring would
// release its records and wake the fetch for another reason), no
// retention check (its tick publishes the partition's view, which wakes
// a waiting fetch as an append does, and hid a missing wake-up behind a
// stall of a few seconds), topic "w" of one partition filled with n
// records, and share group "sg" with member m1. It returns the topic id
// and two clients, one per member (a waiting fetch holds the answers of
// the requests behind it on its connection).
func startShareWakeBroker(t *testing.T, lock time.Duration, n int) (*Broker, [16]byte, *kgo.Client, *kgo.Client) {
	t.Helper()
	b := startGroupBroker(t, t.TempDir(), func(c *Config) {
		shareTimings(lock, 5)(c)
		c.ShareSessionTimeout = time.Minute
		c.SharePartitionMaxRecordLocks = 10
		c.RetentionCheckInterval = time.Hour
	})
	createGroupTopic(t, newAdmin(t, b.Addr()), "w", 1)
	produce(t, b.Addr(), "w", 0, n)
	var cls [2]*kgo.Client
	for i := range cls {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		cls[i] = cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if hb := shareHeartbeat(t, ctx, cls[0], "sg", "m1", 0, "w"); hb.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(hb.ErrorCode))
	}
	return b, topicIDOf(t, b, "w"), cls[0], cls[1]
}

// waitingShareFetch sends member's ShareFetch (record_limit, up to 100
// records, shareWakeMaxWait) and returns once the broker holds it waiting;
// the answer comes on the channel.
func waitingShareFetch(t *testing.T, ctx context.Context, b *Broker, cl *kgo.Client, member string, epoch int32, tid [16]byte) <-chan *kmsg.ShareFetchResponse {
	t.Helper()
	waiting := testutil.ToFloat64(b.Metrics().FetchesWaiting)
	out := make(chan *kmsg.ShareFetchResponse, 1)
	errs := make(chan error, 1)
	go func() {
		resp, err := shareFetchRequest("sg", member, epoch, tid, nil, shareWakeMaxWait, 100, 1).RequestWith(ctx, cl)
		if err != nil {
			errs <- err
			return
		}
		out <- resp
	}()
	waitUntil(t, 10*time.Second, member+"'s fetch waits", func() (bool, string) {
		select {
		case err := <-errs:
			t.Fatalf("%s's fetch: %v", member, err)
		case resp := <-out:
			t.Fatalf("%s's fetch answered before anything freed the window: %d records", member, acquiredCount(resp))
		default:
		}
		n := testutil.ToFloat64(b.Metrics().FetchesWaiting)
		return n > waiting, fmt.Sprintf("%v fetches waiting", n)
	})
	return out
}

// acquired checks that a woken fetch got the records first..last, each
// delivered for the deliveries-th time.
func acquired(t *testing.T, what string, resp *kmsg.ShareFetchResponse, first, last int64, deliveries int16) {
	t.Helper()
	if resp.ErrorCode != 0 {
		t.Fatalf("%s: %v", what, kerr.ErrorForCode(resp.ErrorCode))
	}
	var got []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			got = append(got, p.AcquiredRecords...)
		}
	}
	if len(got) != 1 || got[0].FirstOffset != first || got[0].LastOffset != last || got[0].DeliveryCount != deliveries {
		t.Fatalf("%s: acquired %+v, want %d-%d delivered %d times (none: the fetch was not woken and waited out its MaxWait)",
			what, got, first, last, deliveries)
	}
}

// TestShareFetchWokenByAnotherMember: a ShareFetch waiting on a full
// in-flight window completes as soon as another member's acknowledgement
// moves the window, or its release makes records available again, or new
// records arrive — not at its MaxWait. Apache completes its delayed share
// fetches (DelayedShareFetch, keyed by group and partition) after every
// acknowledgement and release of the partition; kaas wakes them when one
// changes what a fetch can acquire. franz-go's share consumer sends its
// next ShareFetch before the records of the last are acknowledged, so
// without this, members of a busy group sleep out their MaxWait.
func TestShareFetchWokenByAnotherMember(t *testing.T) {
	b, tid, cl1, cl2 := startShareWakeBroker(t, 30*time.Second, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// m1 fills the window: records 0-9 (record_limit stops at the bound).
	acquired(t, "m1's first fetch", shareFetchMode(t, ctx, cl1, "sg", "m1", 0, tid, nil, 5000, 100, 1), 0, 9, 1)

	// m1's acceptance moves the window: m2's waiting fetch takes 10-19.
	m2 := waitingShareFetch(t, ctx, b, cl2, "m2", 0, tid)
	accept := shareAck(t, ctx, cl1, "sg", "m1", 1, tid, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}})
	if accept.ErrorCode != 0 || accept.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("m1 accepting 0-9: %+v", accept)
	}
	acquired(t, "m2's fetch after m1 accepted", <-m2, 10, 19, 1)

	// The window is full again, with m2's records: m2's release makes
	// them available to m1's waiting fetch.
	m1 := waitingShareFetch(t, ctx, b, cl1, "m1", 2, tid)
	release := shareAck(t, ctx, cl2, "sg", "m2", 1, tid, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 10, LastOffset: 19, AcknowledgeTypes: []int8{2}})
	if release.ErrorCode != 0 || release.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("m2 releasing 10-19: %+v", release)
	}
	acquired(t, "m1's fetch after m2 released", <-m1, 10, 19, 2)

	// Everything is acquired or done: m2 waits for new records, and m1's
	// acceptance of 10-19 makes room for them.
	accept = shareAck(t, ctx, cl1, "sg", "m1", 3, tid, kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{FirstOffset: 10, LastOffset: 19, AcknowledgeTypes: []int8{1}})
	if accept.ErrorCode != 0 || accept.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("m1 accepting 10-19: %+v", accept)
	}
	m2 = waitingShareFetch(t, ctx, b, cl2, "m2", 2, tid)
	produce(t, b.Addr(), "w", 0, 1)
	acquired(t, "m2's fetch after a new record", <-m2, 20, 20, 1)
}

// TestShareFetchWokenByLockExpiry: a ShareFetch waiting on a window full
// of another member's records completes when their locks run out, with
// the records delivered a second time.
func TestShareFetchWokenByLockExpiry(t *testing.T) {
	_, tid, cl1, cl2 := startShareWakeBroker(t, time.Second, 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acquired(t, "m1's fetch", shareFetchMode(t, ctx, cl1, "sg", "m1", 0, tid, nil, 5000, 100, 1), 0, 9, 1)
	// m1 never acknowledges; the lock (1 s) may even run out before m2's
	// fetch is seen waiting, in which case it answers at once.
	resp, err := shareFetchRequest("sg", "m2", 0, tid, nil, shareWakeMaxWait, 100, 1).RequestWith(ctx, cl2)
	if err != nil {
		t.Fatal(err)
	}
	acquired(t, "m2's fetch after m1's locks ran out", resp, 0, 9, 2)
}

// TestShareFetchHeldUpByItsOwnMember: a member whose records hold up a
// full window (it holds the window's first records, so only its own
// acknowledgement moves it) gets its fetch answered, empty, long before
// the fetch's MaxWait: its client sends that acknowledgement only after
// the answer (behind the fetch on its connection, or from franz-go's
// share loop waiting on it), so waiting would stall the whole group until
// MaxWait. A fetch held up again without an acknowledgement in between
// is answered too (after a longer wait, bounded by MaxWait), and once it
// acknowledges, the window moves on for it.
func TestShareFetchHeldUpByItsOwnMember(t *testing.T) {
	_, tid, cl, _ := startShareWakeBroker(t, time.Minute, 20)
	// Far below the fetches' MaxWait (60 s): a fetch that waited it out
	// fails the test on this deadline instead.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acquired(t, "m1's first fetch", shareFetchMode(t, ctx, cl, "sg", "m1", 0, tid, nil, 5000, 100, 1), 0, 9, 1)
	for epoch := int32(1); epoch <= 3; epoch++ {
		if f := shareFetchMode(t, ctx, cl, "sg", "m1", epoch, tid, nil, 60_000, 100, 1); f.ErrorCode != 0 || acquiredCount(f) != 0 {
			t.Fatalf("held-up fetch at epoch %d: %+v", epoch, f)
		}
	}
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 9, AcknowledgeTypes: []int8{1}}}
	acquired(t, "m1's fetch with its acceptance", shareFetchMode(t, ctx, cl, "sg", "m1", 4, tid, accept, 60_000, 100, 1), 10, 19, 1)
}

// TestShareFetchWithAcksAnsweredOnceDurable: a fetch carrying
// acknowledgements that frees nothing it could take (another member
// holds the front of the full window) is answered with their results
// once they are durable, long before its MaxWait: its client waits for
// those results (franz-go's FlushAcks).
func TestShareFetchWithAcksAnsweredOnceDurable(t *testing.T) {
	_, tid, cl1, cl2 := startShareWakeBroker(t, time.Minute, 20)
	// Far below the fetch's MaxWait (60 s): a fetch that waited it out
	// fails the test on this deadline instead.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fillWindow(t, ctx, cl1, cl2, tid, 100)
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 5, LastOffset: 9, AcknowledgeTypes: []int8{1}}}
	f := shareFetchMode(t, ctx, cl2, "sg", "m2", 1, tid, accept, 60_000, 100, 1)
	if code := ackCode(f); code != 0 || acquiredCount(f) != 0 {
		t.Fatalf("m2's acceptance of 5-9 behind m1's 0-4: code %v, %d records", kerr.ErrorForCode(code), acquiredCount(f))
	}
}

// TestShareFetchWaitingComesToHoldUpTheWindow: a fetch that waits on a
// window full of others' records, and whose member comes to hold the
// window's first records while it waits (the member in front accepted
// its records and took the room they left), is answered, empty, soon —
// not at its MaxWait. franz-go's share consumer sends its next fetch as
// a poll takes the records, often before they are acknowledged, and
// sends those acknowledgements only once the fetch is answered: waiting
// to MaxWait (500 ms) stalled every member of kaas bench share-8 at once.
func TestShareFetchWaitingComesToHoldUpTheWindow(t *testing.T) {
	b, tid, cl1, cl2 := startShareWakeBroker(t, time.Minute, 20)
	// Far below the fetches' MaxWait (20 s): a fetch that waited it out
	// fails the test on this deadline instead.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fillWindow(t, ctx, cl1, cl2, tid, 5)
	// The window is full and m1 holds its front: m2's next fetch waits.
	m2 := waitingShareFetch(t, ctx, b, cl2, "m2", 1, tid)
	// m1 accepts 0-4 on its next fetch and takes 10-14: m2 now holds the
	// front of a full window, and only its own acknowledgement, which
	// its client sends after this fetch's answer, can move it. (If m2's
	// fetch is woken before m1's takes the room, m2 gets 10-14 instead:
	// answered at once too.)
	accept := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 4, AcknowledgeTypes: []int8{1}}}
	if f := shareFetchMode(t, ctx, cl1, "sg", "m1", 1, tid, accept, 5000, 5, 1); ackCode(f) != 0 {
		t.Fatalf("m1's acceptance of 0-4: %v", kerr.ErrorForCode(ackCode(f)))
	}
	select {
	case resp := <-m2:
		if resp.ErrorCode != 0 {
			t.Fatalf("m2's fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
	case <-ctx.Done():
		t.Fatal("m2's fetch, holding up the window, waited for its MaxWait")
	}
}

// fillWindow fills the window of startShareWakeBroker's partition: m1
// acquires records 0-4, then m2 (asking for up to m2Max) 5-9.
func fillWindow(t *testing.T, ctx context.Context, cl1, cl2 *kgo.Client, tid [16]byte, m2Max int32) {
	t.Helper()
	acquired(t, "m1's fetch", shareFetchMode(t, ctx, cl1, "sg", "m1", 0, tid, nil, 5000, 5, 1), 0, 4, 1)
	acquired(t, "m2's fetch", shareFetchMode(t, ctx, cl2, "sg", "m2", 0, tid, nil, 5000, m2Max, 1), 5, 9, 1)
}
