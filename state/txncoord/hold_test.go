package txncoord

import (
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"
)

// TestWaitDeadline: a request's own deadline wins; without one the
// coordinator's bound counts from its arrival (R-TXN-2).
func TestWaitDeadline(t *testing.T) {
	own := now0.Add(300 * time.Millisecond)
	if got := WaitDeadline(now0, own, 5*time.Second); !got.Equal(own) {
		t.Fatalf("with its own deadline: %v, want %v", got, own)
	}
	if got := WaitDeadline(now0, time.Time{}, 5*time.Second); !got.Equal(now0.Add(5 * time.Second)) {
		t.Fatalf("without: %v, want arrival + bound", got)
	}
}

// TestWaitForTheTransitionInFlight runs the actor's hold loop on an
// injected clock (R-TXN-2 [project]): requests arrive while a commit is
// being written and its markers are out; the write and the markers land
// at given times; the clock only moves to the next event or to the
// earliest deadline the queue reports (the actor's timer). A request is
// answered CONCURRENT_TRANSACTIONS only once its own deadline has come
// with the markers still out — never while the write is outstanding,
// never when the markers land first — and is otherwise handled as soon
// as nothing it needs is in flight, in arrival order.
func TestWaitForTheTransitionInFlight(t *testing.T) {
	const bound = 5 * time.Second
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	type req struct {
		name    string
		arrive  time.Duration
		markers bool          // needs the transition finished (else only its write)
		own     time.Duration // its own deadline from now0; 0: none (arrival + bound)
	}
	for _, tc := range []struct {
		name              string
		reqs              []req
		persisted, landed time.Duration // the Prepare* write, then the last marker; 0: never
		want              []string      // "name ready@ms" or "name 51@ms", in order
	}{
		{"markers land within the bound: handled then",
			[]req{{"APT", ms(1), true, 0}}, ms(2), ms(4000),
			[]string{"APT ready@4000"}},
		{"markers land one instant before the deadline",
			[]req{{"IPI", ms(0), true, 0}}, ms(1), bound - time.Nanosecond,
			[]string{"IPI ready@4999.999999"}},
		{"markers out past the bound: 51 at the deadline, not before",
			[]req{{"APT", ms(10), true, 0}}, ms(20), 0,
			[]string{"APT 51@5010"}},
		{"the write outstanding past the deadline: kept while it is (it always completes), then 51 with the markers out",
			[]req{{"EndTxn", ms(0), true, 0}}, ms(6000), ms(6500),
			[]string{"EndTxn 51@6000"}},
		{"a request needing only the write, outstanding past the bound: handled once durable",
			[]req{{"verify", ms(0), false, 0}}, ms(6000), 0,
			[]string{"verify ready@6000"}},
		{"a request needing only the write is handled once it is durable",
			[]req{{"verify", ms(0), false, 0}, {"APT", ms(1), true, 0}}, ms(3), ms(50),
			[]string{"verify ready@3", "APT ready@50"}},
		{"its own shorter deadline (a Produce's timeout): 51 then; the others wait on",
			[]req{{"APT", ms(0), true, 0}, {"implicit add", ms(5), true, ms(300)}}, ms(1), ms(1000),
			[]string{"implicit add 51@300", "APT ready@1000"}},
		{"its own longer deadline: waits past the bound",
			[]req{{"implicit add", ms(0), true, ms(9000)}}, ms(1), ms(8000),
			[]string{"implicit add ready@8000"}},
		{"arrival order among the ready",
			[]req{{"IPI", ms(0), true, 0}, {"APT", ms(1), true, 0}, {"EndTxn", ms(2), true, 0}}, ms(3), ms(10),
			[]string{"IPI ready@10", "APT ready@10", "EndTxn ready@10"}},
		{"a deadline already gone on arrival",
			[]req{{"implicit add", ms(100), true, ms(50)}}, ms(1), ms(1000),
			[]string{"implicit add 51@100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx := load(t, "⟨P,0,P,-1,Ongoing,{a-0 a-1}⟩")
			var w Waiting
			var got []string
			clock := now0
			at := func(d time.Duration) time.Time { return now0.Add(d) }
			stamp := func() string {
				return fmt.Sprintf("@%s", fmt.Sprint(float64(clock.Sub(now0))/float64(time.Millisecond)))
			}
			settle := func() { // the actor after every message
				for m, ok := w.Ready(tx); ok; m, ok = w.Ready(tx) {
					got = append(got, m.(string)+" ready"+stamp())
				}
			}
			expire := func() { // the actor's hold timer
				for _, m := range w.Expired(tx, clock) {
					got = append(got, m.(string)+" 51"+stamp())
				}
			}

			s := tx.EndTxn("end", EndTxn{ProducerID: pidP, ProducerEpoch: 0, Commit: true}, now0, newPIDs())
			if s.Persist == nil || !tx.Persisting() {
				t.Fatalf("EndTxn did not start its write: %+v", s)
			}
			var markers []Marker
			type event struct {
				at time.Duration
				do func()
			}
			var events []event
			for _, r := range tc.reqs {
				events = append(events, event{r.arrive, func() {
					if !tx.MustWait(r.markers) {
						got = append(got, r.name+" not held"+stamp())
						return
					}
					own := time.Time{}
					if r.own != 0 {
						own = at(r.own)
					}
					w.Hold(r.name, r.markers, WaitDeadline(clock, own, bound))
				}})
			}
			if tc.persisted != 0 {
				events = append(events, event{tc.persisted, func() { markers = tx.PersistDone(nil, clock).Markers }})
			}
			if tc.landed != 0 {
				events = append(events, event{tc.landed, func() {
					for _, m := range markers {
						tx.MarkerDone(m.Round, m.Key, 0, clock)
					}
				}})
			}
			sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
			for len(events) > 0 || w.Len() > 0 {
				next := time.Duration(-1)
				if len(events) > 0 {
					next = events[0].at
				}
				if d, ok := w.Deadline(); ok && !tx.Persisting() && (next < 0 || d.Sub(now0) < next) {
					clock = maxTime(clock, d)
					expire()
					continue
				}
				if next < 0 {
					break // only writes' waiters left, and no write will land
				}
				clock = at(next)
				events[0].do()
				events = events[1:]
				settle()
				expire() // a deadline already gone
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
			if w.Len() != 0 {
				t.Fatalf("%d requests still held", w.Len())
			}
		})
	}
}

// TestWaitingDrain: a stopping actor answers every held request.
func TestWaitingDrain(t *testing.T) {
	var w Waiting
	w.Hold("a", true, now0)
	w.Hold("b", false, now0)
	if got := w.Drain(); !reflect.DeepEqual(got, []any{"a", "b"}) || w.Len() != 0 {
		t.Fatalf("drained %v, %d left", got, w.Len())
	}
	if _, ok := w.Deadline(); ok {
		t.Fatal("a deadline after draining")
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
