package sharepartition

import (
	"testing"
	"time"
)

// KIP-1206's batch_optimized acquisition, as Apache 4.2's
// SharePartition: log batches are handed out whole, the one that reaches
// MaxRecords included, as in-flight entries of about BatchSize records
// split at batch boundaries; an entry is one state, holder, count and
// lock until part of it is acknowledged.
func TestBatchAcquisition(t *testing.T) {
	three := []Batch{b(0, 9), b(10, 19), b(20, 29)}
	t.Run("whole batches past MaxRecords, one entry", func(t *testing.T) {
		play(t, cfg(time.Minute, 5, 100), 0, []step{
			{name: "15 wanted: the batch holding the 15th comes whole", acquire: "A", batches: three, max: 15,
				got: []Range{acq(0, 19, 1)}, spso: 0, window: rep("q1A", 20), entries: "0-19:q1A"},
			{name: "the rest", acquire: "B", batches: three[2:], max: 15,
				got: []Range{acq(20, 29, 1)}, spso: 0, window: rep("q1A", 20) + " " + rep("q1B", 10), entries: "0-19:q1A 20-29:q1B"},
		})
	})
	t.Run("entries of BatchSize at batch boundaries", func(t *testing.T) {
		play(t, cfg(time.Minute, 5, 100), 0, []step{
			{name: "30 in entries of 10", acquire: "A", batches: three, max: 30, size: 10,
				got: []Range{acq(0, 9, 1), acq(10, 19, 1), acq(20, 29, 1)}, spso: 0, window: rep("q1A", 30), entries: "0-9:q1A 10-19:q1A 20-29:q1A"},
		})
		play(t, cfg(time.Minute, 5, 100), 0, []step{
			{name: "BatchSize 15: an entry grows to 20 before the next starts", acquire: "A", batches: three, max: 30, size: 15,
				got: []Range{acq(0, 19, 1), acq(20, 29, 1)}, spso: 0, window: rep("q1A", 30), entries: "0-19:q1A 20-29:q1A"},
		})
	})
	t.Run("record_limit cuts the batch", func(t *testing.T) {
		play(t, cfg(time.Minute, 5, 100), 0, []step{
			{name: "5 of 30", acquire: "A", batches: three, max: 5, mode: RecordLimit,
				got: []Range{acq(0, 4, 1)}, spso: 0, window: rep("q1A", 5), entries: "0-4:q1A"},
			{name: "the next 12 across a boundary, one entry", acquire: "A", batches: three, max: 12, mode: RecordLimit,
				got: []Range{acq(5, 16, 1)}, spso: 0, window: rep("q1A", 17), entries: "0-4:q1A 5-16:q1A"},
		})
	})
	t.Run("the window bound is soft at a batch", func(t *testing.T) {
		play(t, cfg(time.Minute, 5, 10), 0, []step{
			{name: "10 locks, a batch of 30 goes whole", acquire: "A", batches: []Batch{b(0, 29)}, max: 5,
				got: []Range{acq(0, 29, 1)}, spso: 0, window: rep("q1A", 30), entries: "0-29:q1A"},
			{name: "full: nothing more", acquire: "B", batches: []Batch{b(30, 39)}, spso: 0, window: rep("q1A", 30)},
			{name: "accepting it frees the window", ack: "A", acks: []AckBatch{ab(0, 29, Accept)}, spso: 30, window: "", entries: ""},
			{name: "room again", acquire: "B", batches: []Batch{b(30, 39)}, got: []Range{acq(30, 39, 1)}, spso: 30, window: rep("q1B", 10)},
		})
	})
}

// Acknowledging part of an entry splits it; a whole entry released, lock
// expired or archived at the delivery limit moves as one.
func TestBatchSplitsAndWholeBatchTransitions(t *testing.T) {
	lock := 10 * time.Second
	play(t, cfg(lock, 2, 100), 0, []step{
		{name: "A gets a batch of 10", acquire: "A", batches: []Batch{b(0, 9)}, got: []Range{acq(0, 9, 1)},
			spso: 0, window: rep("q1A", 10), entries: "0-9:q1A"},
		{name: "B gets the next", acquire: "B", batches: []Batch{b(10, 19)}, got: []Range{acq(10, 19, 1)},
			spso: 0, window: rep("q1A", 10) + " " + rep("q1B", 10), entries: "0-9:q1A 10-19:q1B"},
		{name: "A accepts 0-3, releases 4-5, one type each for 6-9", ack: "A",
			acks: []AckBatch{ab(0, 3, Accept), ab(4, 5, Release), ab(6, 9, Reject, Accept, Accept, Renew)}, renewOK: true,
			spso: 4, window: "a1 a1 x1 k1 k1 q1A " + rep("q1B", 10), entries: "4-5:a1 6-6:x1 7-8:k1 9-9:q1A 10-19:q1B"},
		{name: "C re-acquires the released part as one entry", acquire: "C", batches: []Batch{b(0, 9)}, got: []Range{acq(4, 5, 2)},
			spso: 4, window: "q2C q2C x1 k1 k1 q1A " + rep("q1B", 10), entries: "4-5:q2C 6-6:x1 7-8:k1 9-9:q1A 10-19:q1B"},
		{name: "a read covering part of an entry splits it", ack: "B", acks: []AckBatch{ab(10, 19, Release)},
			spso: 4, window: "q2C q2C x1 k1 k1 q1A " + rep("a1", 10), entries: "4-5:q2C 6-6:x1 7-8:k1 9-9:q1A 10-19:a1"},
		{name: "C reads 10-14 only", acquire: "C", batches: []Batch{b(10, 14)}, got: []Range{acq(10, 14, 2)},
			spso: 4, window: "q2C q2C x1 k1 k1 q1A " + rep("q2C", 5) + " " + rep("a1", 5), entries: "4-5:q2C 6-6:x1 7-8:k1 9-9:q1A 10-14:q2C 15-19:a1"},
		{name: "the locks run out (the renewal was at the same instant): C's at the limit archive whole", advance: lock,
			spso: 9, window: "a1 x2 x2 x2 x2 x2 " + rep("a1", 5), entries: "9-9:a1 10-14:x2 15-19:a1"},
		{name: "redelivery of what is left", acquire: "A", batches: []Batch{b(0, 9), b(10, 19)},
			got: []Range{acq(9, 9, 2), acq(15, 19, 2)}, spso: 9, window: "q2A x2 x2 x2 x2 x2 " + rep("q2A", 5), entries: "9-9:q2A 10-14:x2 15-19:q2A"},
		{name: "A leaves: at the limit both archive, the window empties", releaseAll: "A", spso: 20, window: "", entries: ""},
	})
}

// A batch that expires is counted by records, and redelivered whole.
func TestBatchLockExpiryStats(t *testing.T) {
	p := play(t, cfg(time.Second, 5, 100), 0, []step{
		{name: "acquire", acquire: "A", batches: []Batch{b(0, 99)}, got: []Range{acq(0, 99, 1)}, spso: 0, window: rep("q1A", 100), entries: "0-99:q1A"},
		{name: "expire", advance: time.Second, spso: 0, window: rep("a1", 100), entries: "0-99:a1"},
		{name: "again whole", acquire: "B", batches: []Batch{b(0, 99)}, got: []Range{acq(0, 99, 2)}, spso: 0, window: rep("q2B", 100), entries: "0-99:q2B"},
	})
	if s := p.Stats(); s.Expired != 100 || s.Acquired != 200 || s.Redelivered != 100 {
		t.Fatalf("stats %+v", s)
	}
	if p.Entries() != 1 {
		t.Fatal(p.Entries())
	}
}

// A snapshot of split entries merges what persists alike; restored, a
// run is one entry again.
func TestBatchSnapshot(t *testing.T) {
	now := time.Unix(0, 0)
	c := cfg(time.Minute, 5, 100)
	p := New(0, c)
	p.Acquire("A", []Batch{b(0, 9), b(10, 19)}, Want{MaxRecords: 20, BatchSize: 10}, now)
	p.Acknowledge("A", []AckBatch{ab(2, 3, Accept)}, false, now)
	s := p.Snapshot()
	want := []Run{{0, 1, Available, 1}, {2, 3, Acknowledged, 1}, {4, 19, Available, 1}}
	if len(s.Runs) != len(want) {
		t.Fatalf("snapshot %v", s)
	}
	for i := range want {
		if s.Runs[i] != want[i] {
			t.Fatalf("snapshot %v, want %v", s.Runs, want)
		}
	}
	q := Restore(s, c)
	if entries(q) != "0-1:a1 2-3:k1 4-19:a1" {
		t.Fatal(entries(q))
	}
}

func rep(tok string, n int) string {
	s := tok
	for range n - 1 {
		s += " " + tok
	}
	return s
}
