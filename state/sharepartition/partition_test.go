package sharepartition

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A scenario is a list of steps on one share-partition with a fake clock;
// after each step the test checks the window, written one token per
// in-flight record: state letter (a Available, q Acquired, k
// Acknowledged, x Archived) then delivery count, and q's holder.
type step struct {
	name    string
	advance time.Duration // clock moves first
	// one of:
	acquire    string // member
	batches    []Batch
	max        int
	size       int // BatchSize
	mode       Mode
	ack        string // member
	acks       []AckBatch
	renewOK    bool
	releaseAll string
	// expected:
	got     []Range
	code    int16
	spso    int64
	window  string
	entries string // when set: the in-flight entries (see entries)
}

func b(first, last int64) Batch       { return Batch{First: first, Last: last} }
func aborted(first, last int64) Batch { return Batch{First: first, Last: last, Aborted: true} }
func ab(first, last int64, t ...AckType) AckBatch {
	return AckBatch{First: first, Last: last, Types: t}
}
func acq(first, last int64, d int16) Range {
	return Range{First: first, Last: last, Deliveries: d}
}

func window(p *Partition) string {
	var parts []string
	for _, r := range p.InFlight(1 << 20) {
		s := fmt.Sprintf("%c%d", "aq?k?x"[map[State]int{Available: 0, Acquired: 1, Acknowledged: 3, Archived: 5}[r.State]], r.Deliveries)
		if r.State == Acquired {
			s += r.Member
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// entries writes the in-flight entries, "first-last:" then the token of
// window (state, delivery count, holder).
func entries(p *Partition) string {
	var parts []string
	for _, r := range p.runs {
		s := fmt.Sprintf("%d-%d:%c%d", r.first, r.last, "aq?k?x"[map[State]int{Available: 0, Acquired: 1, Acknowledged: 3, Archived: 5}[r.state]], r.deliveries)
		if r.state == Acquired {
			s += r.member
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// checkRuns: the entries cover [SPSO, next) in order without holes, the
// first is not done, and only Acquired ones have a holder and a lock.
func checkRuns(t *testing.T, name string, p *Partition) {
	t.Helper()
	at := p.start
	for i, r := range p.runs {
		if r.first != at || r.last < r.first {
			t.Fatalf("%s: entry %d is %d-%d, want it to start at %d: %s", name, i, r.first, r.last, at, entries(p))
		}
		if (r.state == Acquired) != (r.member != "") || (r.state == Acquired) == r.deadline.IsZero() {
			t.Fatalf("%s: entry %d-%d %v has holder %q and deadline %v", name, r.first, r.last, r.state, r.member, r.deadline)
		}
		at = r.last + 1
	}
	if at != p.next {
		t.Fatalf("%s: entries end at %d, next is %d", name, at, p.next)
	}
	if len(p.runs) > 0 && p.runs[0].state.done() {
		t.Fatalf("%s: a done entry at the SPSO: %s", name, entries(p))
	}
}

func play(t *testing.T, cfg Config, start int64, steps []step) *Partition {
	t.Helper()
	now := time.Unix(1000, 0)
	p := New(start, cfg)
	for _, s := range steps {
		now = now.Add(s.advance)
		switch {
		case s.acquire != "":
			max := s.max
			if max == 0 {
				max = 500
			}
			got := p.Acquire(s.acquire, s.batches, Want{MaxRecords: max, BatchSize: s.size, Mode: s.mode}, now)
			if !slices.Equal(got, s.got) {
				t.Fatalf("%s: acquired %v, want %v", s.name, got, s.got)
			}
		case s.ack != "":
			if code := p.Acknowledge(s.ack, s.acks, s.renewOK, now); code != s.code {
				t.Fatalf("%s: code %v, want %v", s.name, kerr.ErrorForCode(code), kerr.ErrorForCode(s.code))
			}
		case s.releaseAll != "":
			p.ReleaseMember(s.releaseAll, now)
		default:
			p.Expire(now)
		}
		if p.Start() != s.spso || window(p) != s.window {
			t.Fatalf("%s: spso %d window %q, want %d %q", s.name, p.Start(), window(p), s.spso, s.window)
		}
		if s.entries != "" && entries(p) != s.entries {
			t.Fatalf("%s: entries %q, want %q", s.name, entries(p), s.entries)
		}
		checkRuns(t, s.name, p)
	}
	return p
}

func cfg(lock time.Duration, limit int16, locks int) Config {
	return Config{LockDuration: lock, DeliveryLimit: limit, MaxRecordLocks: locks}
}

// KIP-932's walk-through: two consumers share a partition; acknowledged
// records below every in-flight one move the SPSO; a released record is
// redelivered to whoever fetches next, its delivery count one higher.
func TestKIPExample(t *testing.T) {
	play(t, cfg(30*time.Second, 5, 100), 0, []step{
		{name: "A fetches 0-3", acquire: "A", batches: []Batch{b(0, 1), b(2, 3)}, max: 4,
			got: []Range{acq(0, 3, 1)}, spso: 0, window: "q1A q1A q1A q1A"},
		{name: "B fetches 4-6", acquire: "B", batches: []Batch{b(4, 6)},
			got: []Range{acq(4, 6, 1)}, spso: 0, window: "q1A q1A q1A q1A q1B q1B q1B"},
		{name: "B accepts 4-6 first: SPSO stays", ack: "B", acks: []AckBatch{ab(4, 6, Accept)},
			spso: 0, window: "q1A q1A q1A q1A k1 k1 k1"},
		{name: "A accepts 0, releases 1, rejects 2, gap 3", ack: "A", acks: []AckBatch{ab(0, 3, Accept, Release, Reject, Gap)},
			spso: 1, window: "a1 x1 x1 k1 k1 k1"},
		{name: "B gets the released record again", acquire: "B", batches: []Batch{b(0, 1), b(2, 3)},
			got: []Range{acq(1, 1, 2)}, spso: 1, window: "q2B x1 x1 k1 k1 k1"},
		{name: "B accepts it: SPSO jumps past everything done", ack: "B", acks: []AckBatch{ab(1, 1, Accept)},
			spso: 7, window: ""},
	})
}

// A lock that runs out makes the record available again; an
// acknowledgement after the deadline is refused, even with no sweep in
// between; the limit archives on the fifth expiry.
func TestLockExpiryAndDeliveryLimit(t *testing.T) {
	lock := 10 * time.Second
	steps := []step{
		{name: "acquire", acquire: "A", batches: []Batch{b(0, 1)}, got: []Range{acq(0, 1, 1)}, spso: 0, window: "q1A q1A"},
		{name: "just before the deadline", advance: lock - time.Nanosecond, spso: 0, window: "q1A q1A"},
		{name: "at the deadline: ack refused", advance: time.Nanosecond, ack: "A", acks: []AckBatch{ab(0, 0, Accept)},
			code: kerr.InvalidRecordState.Code, spso: 0, window: "a1 a1"},
	}
	for d := int16(2); d <= 2; d++ {
		steps = append(steps,
			step{name: fmt.Sprintf("redelivery %d", d), acquire: "B", batches: []Batch{b(0, 1)}, got: []Range{acq(0, 1, d)}, spso: 0, window: fmt.Sprintf("q%dB q%dB", d, d)},
			step{name: fmt.Sprintf("expiry %d", d), advance: lock, spso: 0, window: fmt.Sprintf("a%d a%d", d, d)})
	}
	steps = append(steps,
		step{name: "third delivery, one renewed", acquire: "B", batches: []Batch{b(0, 1)}, got: []Range{acq(0, 1, 3)}, spso: 0, window: "q3B q3B"},
		step{name: "renew without IsRenewAck is bad", advance: lock / 2, ack: "B", acks: []AckBatch{ab(1, 1, Renew)},
			code: kerr.InvalidRequest.Code, spso: 0, window: "q3B q3B"},
		step{name: "renew offset 1", ack: "B", acks: []AckBatch{ab(1, 1, Renew)}, renewOK: true, spso: 0, window: "q3B q3B"},
		step{name: "offset 0 expires at the limit and is archived; 1 is still locked", advance: lock / 2, spso: 1, window: "q3B"},
		step{name: "renewed lock runs out too", advance: lock / 2, spso: 2, window: ""},
	)
	play(t, cfg(lock, 3, 100), 0, steps)
}

func TestReleaseAtLimitArchives(t *testing.T) {
	play(t, cfg(time.Minute, 2, 100), 5, []step{
		{name: "acquire", acquire: "A", batches: []Batch{b(5, 5)}, got: []Range{acq(5, 5, 1)}, spso: 5, window: "q1A"},
		{name: "release", ack: "A", acks: []AckBatch{ab(5, 5, Release)}, spso: 5, window: "a1"},
		{name: "again", acquire: "A", batches: []Batch{b(5, 5)}, got: []Range{acq(5, 5, 2)}, spso: 5, window: "q2A"},
		{name: "release at the limit archives", ack: "A", acks: []AckBatch{ab(5, 5, Release)}, spso: 6, window: ""},
		{name: "nothing left", acquire: "A", batches: []Batch{b(5, 5)}, spso: 6, window: ""},
	})
}

func TestMemberLeaves(t *testing.T) {
	play(t, cfg(time.Minute, 5, 100), 0, []step{
		{name: "A", acquire: "A", batches: []Batch{b(0, 1)}, got: []Range{acq(0, 1, 1)}, spso: 0, window: "q1A q1A"},
		{name: "B", acquire: "B", batches: []Batch{b(2, 2)}, got: []Range{acq(2, 2, 1)}, spso: 0, window: "q1A q1A q1B"},
		{name: "A leaves", releaseAll: "A", spso: 0, window: "a1 a1 q1B"},
		{name: "B takes A's", acquire: "B", batches: []Batch{b(0, 1)}, got: []Range{acq(0, 1, 2)}, spso: 0, window: "q2B q2B q1B"},
	})
}

// Acknowledgements are all or nothing and each bad one has Apache's code.
func TestAcknowledgeBadInput(t *testing.T) {
	base := []step{{name: "A acquires 0-3", acquire: "A", batches: []Batch{b(0, 3)}, max: 2, mode: RecordLimit,
		got: []Range{acq(0, 1, 1)}, spso: 0, window: "q1A q1A"},
		{name: "B acquires 2-3", acquire: "B", batches: []Batch{b(0, 3)},
			got: []Range{acq(2, 3, 1)}, spso: 0, window: "q1A q1A q1B q1B"}}
	bad := []struct {
		name string
		acks []AckBatch
		code int16
	}{
		{"another member's record", []AckBatch{ab(0, 0, Accept), ab(2, 2, Accept)}, kerr.InvalidRecordState.Code},
		{"beyond the window", []AckBatch{ab(0, 4, Accept)}, kerr.InvalidRequest.Code},
		{"first after last", []AckBatch{ab(1, 0, Accept)}, kerr.InvalidRequest.Code},
		{"overlapping batches", []AckBatch{ab(0, 1, Accept), ab(1, 1, Accept)}, kerr.InvalidRequest.Code},
		{"unordered batches", []AckBatch{ab(1, 1, Accept), ab(0, 0, Accept)}, kerr.InvalidRequest.Code},
		{"no types", []AckBatch{ab(0, 1)}, kerr.InvalidRequest.Code},
		{"wrong number of types", []AckBatch{ab(0, 1, Accept, Accept, Accept)}, kerr.InvalidRequest.Code},
		{"unknown type", []AckBatch{ab(0, 1, 7)}, kerr.InvalidRequest.Code},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			steps := append(slices.Clone(base), step{name: c.name, ack: "A", acks: c.acks, code: c.code, spso: 0, window: "q1A q1A q1B q1B"})
			play(t, cfg(time.Minute, 5, 100), 0, steps)
		})
	}
	t.Run("twice", func(t *testing.T) {
		steps := append(slices.Clone(base),
			step{name: "accept", ack: "A", acks: []AckBatch{ab(0, 1, Accept)}, spso: 2, window: "q1B q1B"},
			step{name: "again: below SPSO, skipped", ack: "A", acks: []AckBatch{ab(0, 1, Accept)}, spso: 2, window: "q1B q1B"},
			step{name: "B accepts 2, then again", ack: "B", acks: []AckBatch{ab(2, 2, Accept)}, spso: 3, window: "q1B"},
			step{name: "B releases 3 and acks it again", ack: "B", acks: []AckBatch{ab(3, 3, Release)}, spso: 3, window: "a1"},
			step{name: "ack of a released record", ack: "B", acks: []AckBatch{ab(3, 3, Accept)}, code: kerr.InvalidRecordState.Code, spso: 3, window: "a1"},
		)
		play(t, cfg(time.Minute, 5, 100), 0, steps)
	})
}

// In record_limit mode the window never holds more than MaxRecordLocks
// records; once full, only released records inside it are handed out.
func TestInFlightBound(t *testing.T) {
	play(t, cfg(time.Minute, 5, 3), 0, []step{
		{name: "fills the window", acquire: "A", mode: RecordLimit, batches: []Batch{b(0, 9)}, got: []Range{acq(0, 2, 1)}, spso: 0, window: "q1A q1A q1A"},
		{name: "full: nothing new", acquire: "B", mode: RecordLimit, batches: []Batch{b(0, 9)}, spso: 0, window: "q1A q1A q1A"},
		{name: "release 1", ack: "A", acks: []AckBatch{ab(1, 1, Release)}, spso: 0, window: "q1A a1 q1A"},
		{name: "B gets only the released one", acquire: "B", mode: RecordLimit, batches: []Batch{b(0, 9)}, got: []Range{acq(1, 1, 2)}, spso: 0, window: "q1A q2B q1A"},
		{name: "accepting the front frees room", ack: "A", acks: []AckBatch{ab(0, 0, Accept)}, spso: 1, window: "q2B q1A"},
		{name: "one more", acquire: "B", mode: RecordLimit, batches: []Batch{b(0, 9)}, got: []Range{acq(3, 3, 1)}, spso: 1, window: "q2B q1A q1B"},
	})
}

// TestHeldUpBy: a member holds the window up when it is full, nothing in
// it is Available, and the member holds its first records.
func TestHeldUpBy(t *testing.T) {
	now := time.Unix(1000, 0)
	p := New(0, cfg(time.Minute, 5, 3))
	check := func(what, member string, want bool) {
		t.Helper()
		if got := p.HeldUpBy(member, now); got != want {
			t.Fatalf("%s: HeldUpBy(%s) = %v, want %v (window %q)", what, member, got, want, window(p))
		}
	}
	check("empty window", "A", false)
	p.Acquire("A", []Batch{b(0, 9)}, Want{MaxRecords: 2, Mode: RecordLimit}, now)
	check("room left", "A", false)
	p.Acquire("B", []Batch{b(0, 9)}, Want{MaxRecords: 1, Mode: RecordLimit}, now)
	check("full, A at the front", "A", true)
	check("full, B not at the front", "B", false)
	p.Acknowledge("A", []AckBatch{ab(1, 1, Release)}, false, now)
	check("full, a record available", "A", false)
	p.Acquire("B", []Batch{b(0, 9)}, Want{MaxRecords: 1, Mode: RecordLimit}, now)
	check("full again, A at the front", "A", true)
	p.Acknowledge("A", []AckBatch{ab(0, 0, Accept)}, false, now)
	check("A's front accepted: room", "A", false)
	p.Acquire("A", []Batch{b(0, 9)}, Want{MaxRecords: 1, Mode: RecordLimit}, now)
	check("full, B at the front", "B", true)
	now = now.Add(time.Minute)
	check("B's lock ran out", "B", false)
}

// read_committed: aborted data is archived, never delivered; offsets no
// batch covers (compaction) enter archived.
func TestAbortedAndGaps(t *testing.T) {
	play(t, cfg(time.Minute, 5, 100), 0, []step{
		{name: "aborted batch, gap, batch", acquire: "A", batches: []Batch{aborted(0, 2), b(5, 6)},
			got: []Range{acq(5, 6, 1)}, spso: 5, window: "q1A q1A"},
		{name: "an aborted batch after acquired ones", acquire: "A", batches: []Batch{b(5, 6), aborted(7, 7), b(8, 8)},
			got: []Range{acq(8, 8, 1)}, spso: 5, window: "q1A q1A x0 q1A"},
	})
}

func TestMaxRecordsAndMerging(t *testing.T) {
	p := play(t, cfg(time.Minute, 5, 100), 0, []step{
		{name: "two", acquire: "A", batches: []Batch{b(0, 4)}, max: 2, mode: RecordLimit, got: []Range{acq(0, 1, 1)}, spso: 0, window: "q1A q1A"},
		{name: "release 0", ack: "A", acks: []AckBatch{ab(0, 0, Release)}, spso: 0, window: "a1 q1A"},
		{name: "redelivered and new are separate runs", acquire: "B", batches: []Batch{b(0, 4)}, max: 3, mode: RecordLimit,
			got: []Range{acq(0, 0, 2), acq(2, 3, 1)}, spso: 0, window: "q2B q1A q1B q1B"},
	})
	if got := p.Stats(); got.Acquired != 5 || got.Redelivered != 1 || got.Released != 1 {
		t.Fatalf("stats %+v", got)
	}
	if p.End() != 3 {
		t.Fatalf("SPEO %d", p.End())
	}
}

func TestFetchOffsetAndDeadline(t *testing.T) {
	now := time.Unix(0, 0)
	p := New(10, cfg(time.Second, 5, 100))
	if p.FetchOffset(now) != 10 {
		t.Fatal(p.FetchOffset(now))
	}
	if _, ok := p.NextDeadline(); ok {
		t.Fatal("deadline with nothing acquired")
	}
	p.Acquire("A", []Batch{b(10, 12)}, Want{MaxRecords: 10}, now)
	if p.FetchOffset(now) != 13 {
		t.Fatal(p.FetchOffset(now))
	}
	p.Acknowledge("A", []AckBatch{ab(11, 11, Release)}, false, now)
	if p.FetchOffset(now) != 11 {
		t.Fatal(p.FetchOffset(now))
	}
	if d, ok := p.NextDeadline(); !ok || !d.Equal(now.Add(time.Second)) {
		t.Fatal(d, ok)
	}
}

// A snapshot keeps what was acknowledged, archived and delivered;
// acquired records come back available with their delivery count.
func TestSnapshotRestore(t *testing.T) {
	now := time.Unix(0, 0)
	c := cfg(time.Minute, 5, 100)
	p := New(0, c)
	p.Acquire("A", []Batch{b(0, 5)}, Want{MaxRecords: 10}, now)
	p.Acknowledge("A", []AckBatch{ab(1, 1, Accept), ab(2, 2, Reject), ab(3, 3, Release)}, false, now)
	p.Acquire("B", []Batch{b(3, 3)}, Want{MaxRecords: 10}, now) // 3 again, delivery 2
	s := p.Snapshot()
	want := Snapshot{Start: 0, Runs: []Run{
		{0, 0, Available, 1}, {1, 1, Acknowledged, 1}, {2, 2, Archived, 1}, {3, 3, Available, 2}, {4, 5, Available, 1},
	}}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("snapshot %v, want %v", s, want)
	}
	q := Restore(s, c)
	if window(q) != "a1 k1 x1 a2 a1 a1" || q.Start() != 0 {
		t.Fatalf("restored %d %q", q.Start(), window(q))
	}
	got := q.Acquire("C", []Batch{b(0, 9)}, Want{MaxRecords: 100}, now)
	if want := []Range{acq(0, 0, 2), acq(3, 3, 3), acq(4, 5, 2), acq(6, 9, 1)}; !slices.Equal(got, want) {
		t.Fatalf("after restore acquired %v, want %v", got, want)
	}
	// A snapshot with holes: the holes were never delivered.
	r := Restore(Snapshot{Start: 4, Runs: []Run{{6, 6, Acknowledged, 1}}}, c)
	if window(r) != "a0 a0 k1" {
		t.Fatalf("holes %q", window(r))
	}
}

// Records are handed out only with their bytes: a released record past
// what was read stays available.
func TestAcquireOnlyWhatWasRead(t *testing.T) {
	play(t, cfg(time.Minute, 5, 100), 0, []step{
		{name: "acquire 0-5", acquire: "A", batches: []Batch{b(0, 2), b(3, 5)}, got: []Range{acq(0, 5, 1)}, spso: 0, window: "q1A q1A q1A q1A q1A q1A"},
		{name: "release 1 and 4", ack: "A", acks: []AckBatch{ab(1, 1, Release), ab(4, 4, Release)}, spso: 0, window: "q1A a1 q1A q1A a1 q1A"},
		{name: "a read of 0-2 only", acquire: "B", batches: []Batch{b(0, 2)}, got: []Range{acq(1, 1, 2)}, spso: 0, window: "q1A q2B q1A q1A a1 q1A"},
		{name: "no batches, nothing", acquire: "B", spso: 0, window: "q1A q2B q1A q1A a1 q1A"},
	})
}
