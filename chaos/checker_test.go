package chaos

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A crafted run: a history built op by op and the log the final read
// finds. Every test starts from clean(), which holds one of each kind
// of outcome the checker must accept, and changes one thing.
type scenario struct {
	events []Event
	nextID int64
	// log is what each partition holds, in offset order; rc marks the
	// records read_committed shows.
	log          map[tp][]entry
	groupOffsets map[tp]int64
	open         []string
	incomplete   map[tp]string // partition → isolation whose read stopped early
	lagging      map[tp]bool   // stable offset below the high watermark
}

type entry struct {
	off int64
	val string
	rc  bool
}

func (s *scenario) op(e Event, t Type, done Event) {
	s.nextID++
	e.ID, e.Type, e.Index = s.nextID, Invoke, len(s.events)
	s.events = append(s.events, e)
	if t == "" {
		return
	}
	done.ID, done.Type, done.F, done.Process, done.Index = s.nextID, t, e.F, e.Process, len(s.events)
	s.events = append(s.events, done)
}

// send records a send; an acknowledged one (OK) carries its offset.
func (s *scenario) send(proc, txn, topic string, p int32, off int64, val string, t Type) {
	rec := Rec{Topic: topic, Partition: p, Offset: -1, Value: val}
	done := Event{}
	if t == OK {
		done.Rec = &Rec{Topic: topic, Partition: p, Offset: off, Value: val}
	}
	s.op(Event{Process: proc, F: Send, Txn: txn, Rec: &rec}, t, done)
}

func (s *scenario) end(txn, intent string, t Type, inputs ...Rec) {
	s.op(Event{Process: strings.Split(txn, ":")[0], F: End, Txn: txn, Intent: intent, Recs: inputs}, t, Event{})
}

func (s *scenario) put(topic string, p int32, off int64, val string, rc bool) {
	k := tp{topic, p}
	s.log[k] = append(s.log[k], entry{off, val, rc})
	slices.SortFunc(s.log[k], func(a, b entry) int { return int(a.off - b.off) })
}

func (s *scenario) remove(topic string, p int32, val string, fromRU, fromRC bool) {
	k := tp{topic, p}
	var out []entry
	for _, e := range s.log[k] {
		if e.val == val {
			if fromRU {
				continue
			}
			if fromRC {
				e.rc = false
			}
		}
		out = append(out, e)
	}
	s.log[k] = out
}

func (s *scenario) setRC(topic string, p int32, val string) {
	for i, e := range s.log[tp{topic, p}] {
		if e.val == val {
			s.log[tp{topic, p}][i].rc = true
		}
	}
}

func rec(topic string, p int32, off int64, val string) Rec {
	return Rec{Topic: topic, Partition: p, Offset: off, Value: val}
}

// final adds each partition's acknowledged sentinel past its last record
// and reads every partition at both isolation levels.
func (s *scenario) final() ([]Event, Final) {
	events := append([]Event(nil), s.events...)
	sc := &scenario{events: events, nextID: s.nextID}
	f := Final{Group: "g", InputTopic: "txn"}
	for _, k := range slices.SortedFunc(maps.Keys(s.log), func(a, b tp) int { return strings.Compare(a.String(), b.String()) }) {
		end := int64(0)
		for _, e := range s.log[k] {
			end = max(end, e.off+1)
		}
		sv := sentinelValue(k.topic, k.partition, 0)
		sc.send("sentinel", "", k.topic, k.partition, end, sv, OK)
		for _, iso := range []string{ReadUncommitted, ReadCommitted} {
			r := PartitionRead{Topic: k.topic, Partition: k.partition, Isolation: iso, Complete: s.incomplete[k] != iso,
				HighWatermark: end + 1, StableOffset: end + 1}
			if s.lagging[k] {
				r.StableOffset = end - 1
			}
			for _, e := range s.log[k] {
				if iso == ReadUncommitted || e.rc {
					r.Records = append(r.Records, Rec{Topic: k.topic, Partition: k.partition, Offset: e.off, Value: e.val})
				}
			}
			r.Records = append(r.Records, Rec{Topic: k.topic, Partition: k.partition, Offset: end, Value: sv})
			f.Reads = append(f.Reads, r)
		}
	}
	for k, o := range s.groupOffsets {
		f.GroupOffsets = append(f.GroupOffsets, Rec{Topic: k.topic, Partition: k.partition, Offset: o})
	}
	f.Open = s.open
	return sc.events, f
}

// clean is a run with nothing wrong in it: acknowledged and unknown
// sends, committed, aborted and unknown transactions, the exactly-once
// group's committed and aborted transactions, live reads and a fault.
func clean() *scenario {
	s := &scenario{log: map[tp][]entry{}, groupOffsets: map[tp]int64{}, incomplete: map[tp]string{}, lagging: map[tp]bool{}}
	s.op(Event{Process: "nemesis", F: Fault, Value: "kill-broker", Note: "broker 2"}, OK, Event{})
	// Idempotent producers on idem/0: three acknowledged, one unknown
	// that was written, one unknown that was not.
	s.send("i1.0", "", "idem", 0, 0, "i1.0:0", OK)
	s.send("i1.0", "", "idem", 0, 1, "i1.0:1", OK)
	s.send("i2.0", "", "idem", 0, 2, "i2.0:0", OK)
	s.send("i2.0", "", "idem", 0, -1, "i2.0:1", Info)
	s.send("i1.0", "", "idem", 0, -1, "i1.0:2", Info)
	s.put("idem", 0, 0, "i1.0:0", true)
	s.put("idem", 0, 1, "i1.0:1", true)
	s.put("idem", 0, 2, "i2.0:0", true)
	s.put("idem", 0, 3, "i2.0:1", true)

	// Transactions on txn/0 and txn/1 (markers take offsets too).
	s.send("t1.0", "t1.0:0", "txn", 0, 0, "t1.0:0:0", OK) // committed
	s.send("t1.0", "t1.0:0", "txn", 1, 0, "t1.0:0:1", OK)
	s.end("t1.0:0", Commit, OK)
	s.put("txn", 0, 0, "t1.0:0:0", true)
	s.put("txn", 1, 0, "t1.0:0:1", true)
	s.send("t1.0", "t1.0:1", "txn", 0, 2, "t1.0:1:0", OK) // aborted
	s.end("t1.0:1", Abort, OK)
	s.put("txn", 0, 2, "t1.0:1:0", false)
	s.send("t2.0", "t2.0:0", "txn", 0, 4, "t2.0:0:0", OK) // commit of unknown outcome: committed
	s.send("t2.0", "t2.0:0", "txn", 1, 3, "t2.0:0:1", OK)
	s.end("t2.0:0", Commit, Info)
	s.put("txn", 0, 4, "t2.0:0:0", true)
	s.put("txn", 1, 3, "t2.0:0:1", true)
	s.send("t2.0", "t2.0:1", "txn", 1, 5, "t2.0:1:0", OK) // commit of unknown outcome: aborted
	s.end("t2.0:1", Commit, Info)
	s.put("txn", 1, 5, "t2.0:1:0", false)
	s.send("t2.0", "t2.0:2", "txn", 0, 6, "t2.0:2:0", OK) // a commit that certainly aborted
	s.end("t2.0:2", Commit, Fail)
	s.put("txn", 0, 6, "t2.0:2:0", false)
	s.send("t2.0", "t2.0:3", "txn", 0, 7, "t2.0:3:0", OK) // unknown, aborted, two partitions
	s.send("t2.0", "t2.0:3", "txn", 1, 6, "t2.0:3:1", OK)
	s.end("t2.0:3", Commit, Info)
	s.put("txn", 0, 7, "t2.0:3:0", false)
	s.put("txn", 1, 6, "t2.0:3:1", false)
	s.send("t3.0", "t3.0:0", "txn", 0, 8, "t3.0:0:0", OK) // committed, not yet consumed by the group
	s.send("t3.0", "t3.0:0", "txn", 1, 8, "t3.0:0:1", OK)
	s.end("t3.0:0", Commit, OK)
	s.put("txn", 0, 8, "t3.0:0:0", true)
	s.put("txn", 1, 8, "t3.0:0:1", true)

	// The exactly-once group consumed txn/0 up to 5 and txn/1 up to 4:
	// a committed transaction, an aborted one, and the committed retry of
	// the aborted one's inputs.
	in00, in01 := rec("txn", 0, 0, "t1.0:0:0"), rec("txn", 1, 0, "t1.0:0:1")
	in20, in21 := rec("txn", 0, 4, "t2.0:0:0"), rec("txn", 1, 3, "t2.0:0:1")
	s.send("c1.0", "c1.0:0", "out", 0, 0, "c1.0:0:0|t1.0:0:0", OK)
	s.send("c1.0", "c1.0:0", "out", 0, 1, "c1.0:0:1|t1.0:0:1", OK)
	s.end("c1.0:0", Commit, OK, in00, in01)
	s.put("out", 0, 0, "c1.0:0:0|t1.0:0:0", true)
	s.put("out", 0, 1, "c1.0:0:1|t1.0:0:1", true)
	s.send("c1.0", "c1.0:1", "out", 0, 3, "c1.0:1:0|t2.0:0:0", OK)
	s.send("c1.0", "c1.0:1", "out", 0, -1, "c1.0:1:1|t2.0:0:1", Info)
	s.end("c1.0:1", Abort, OK, in20, in21)
	s.put("out", 0, 3, "c1.0:1:0|t2.0:0:0", false)
	s.send("c1.0", "c1.0:2", "out", 0, 5, "c1.0:2:0|t2.0:0:0", OK)
	s.send("c1.0", "c1.0:2", "out", 0, 6, "c1.0:2:1|t2.0:0:1", OK)
	s.end("c1.0:2", Commit, OK, in20, in21)
	s.put("out", 0, 5, "c1.0:2:0|t2.0:0:0", true)
	s.put("out", 0, 6, "c1.0:2:1|t2.0:0:1", true)
	s.groupOffsets[tp{"txn", 0}] = 5
	s.groupOffsets[tp{"txn", 1}] = 4

	// Live readers.
	s.events = append(s.events,
		Event{F: Poll, Type: OK, Process: "reader-ru", Isolation: ReadUncommitted, Recs: []Rec{rec("idem", 0, 0, "i1.0:0"), rec("txn", 0, 2, "t1.0:1:0")}},
		Event{F: Poll, Type: OK, Process: "reader-rc", Isolation: ReadCommitted, Recs: []Rec{rec("txn", 0, 0, "t1.0:0:0"), rec("txn", 0, 4, "t2.0:0:0")}})
	return s
}

func TestCheckCleanHistory(t *testing.T) {
	events, f := clean().final()
	rep := Check(events, f)
	if rep.Total() != 0 {
		t.Fatalf("a clean history reported anomalies:\n%s", rep.Evidence())
	}
	want := Stats{Faults: map[string]int{"kill-broker": 1}, Sends: 22, Acked: 19, UnknownSends: 3,
		Committed: 2, Aborted: 2, Unknown: 3, EOSCommitted: 2, EOSAborted: 1, Polled: 10, Final: 24}
	got := rep.Stats
	if !maps.Equal(got.Faults, want.Faults) || got.Faults == nil {
		t.Errorf("faults %v, want %v", got.Faults, want.Faults)
	}
	got.Faults, want.Faults = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stats\n got %+v\nwant %+v", got, want)
	}
	line := rep.Summary("seed=1")
	for _, part := range []string{"seed=1 | faults kill-broker=1 ", " acked=19 ", "txn committed=2 aborted=2 unknown=3", "eos committed=2 aborted=1 unknown=0", " lost=0 ", " broker-exit=0 | OK"} {
		if !strings.Contains(line, part) {
			t.Errorf("summary %q lacks %q", line, part)
		}
	}
}

// Each anomaly kind, planted in the clean history, is caught — and only
// what the change really breaks is reported.
func TestCheckCatchesEachAnomaly(t *testing.T) {
	cases := []struct {
		name  string
		plant func(*scenario)
		want  map[Anomaly]int
	}{
		{"acknowledged record missing from the log", func(s *scenario) {
			s.remove("idem", 0, "i1.0:1", true, true)
		}, map[Anomaly]int{Lost: 1}},
		{"a value twice in the log", func(s *scenario) {
			s.put("idem", 0, 4, "i2.0:1", true)
		}, map[Anomaly]int{Duplicate: 1}},
		{"acknowledged record at another offset", func(s *scenario) {
			s.remove("idem", 0, "i1.0:1", true, true)
			s.put("idem", 0, 5, "i1.0:1", true)
		}, map[Anomaly]int{WrongOffset: 1}},
		{"a producer's records out of its order", func(s *scenario) {
			s.send("i3.0", "", "idem", 0, -1, "i3.0:0", Info)
			s.send("i3.0", "", "idem", 0, -1, "i3.0:1", Info)
			s.put("idem", 0, 10, "i3.0:1", true)
			s.put("idem", 0, 11, "i3.0:0", true)
		}, map[Anomaly]int{Order: 1}},
		{"committed transaction partly invisible to read_committed", func(s *scenario) {
			s.remove("txn", 1, "t3.0:0:1", false, true)
		}, map[Anomaly]int{TxnIncomplete: 1, CommittedMissing: 1}},
		{"committed transaction's record lost", func(s *scenario) {
			s.remove("txn", 1, "t3.0:0:1", true, true)
		}, map[Anomaly]int{TxnIncomplete: 1, Lost: 1}},
		{"aborted transaction visible", func(s *scenario) {
			s.setRC("txn", 0, "t2.0:2:0")
		}, map[Anomaly]int{AbortedVisible: 1}},
		{"transaction never asked to commit visible", func(s *scenario) {
			s.send("t4.0", "t4.0:0", "txn", 0, 9, "t4.0:0:0", OK)
			s.put("txn", 0, 9, "t4.0:0:0", true)
		}, map[Anomaly]int{AbortedVisible: 1}},
		{"commit of unknown outcome partly visible", func(s *scenario) {
			s.setRC("txn", 1, "t2.0:3:1")
		}, map[Anomaly]int{Torn: 1}},
		{"read_committed shows what read_uncommitted does not", nil, map[Anomaly]int{CommittedNotUncommitted: 1}},
		{"record read_committed must show, missing", func(s *scenario) {
			s.remove("idem", 0, "i2.0:0", false, true)
		}, map[Anomaly]int{CommittedMissing: 1}},
		{"consumed input without output", func(s *scenario) {
			s.groupOffsets[tp{"txn", 0}] = 9
		}, map[Anomaly]int{EOSMissing: 1}},
		{"input with two outputs", func(s *scenario) {
			s.send("c1.0", "c1.0:3", "out", 0, 7, "c1.0:3:0|t1.0:0:0", OK)
			s.end("c1.0:3", Commit, OK, rec("txn", 0, 0, "t1.0:0:0"))
			s.put("out", 0, 7, "c1.0:3:0|t1.0:0:0", true)
		}, map[Anomaly]int{EOSDuplicate: 1}},
		{"output beyond the committed offset", func(s *scenario) {
			s.groupOffsets[tp{"txn", 1}] = 1
		}, map[Anomaly]int{EOSOrphan: 1}},
		{"output of an aborted input", func(s *scenario) {
			s.send("c1.0", "c1.0:3", "out", 0, 7, "c1.0:3:0|t2.0:2:0", OK)
			s.end("c1.0:3", Commit, OK, rec("txn", 0, 6, "t2.0:2:0"))
			s.put("out", 0, 7, "c1.0:3:0|t2.0:2:0", true)
		}, map[Anomaly]int{EOSOrphan: 1, AbortedRead: 1, ReadUnstable: 1}},
		{"transaction still open", func(s *scenario) {
			s.open = []string{"chaos-t1 Ongoing"}
		}, map[Anomaly]int{Hanging: 1}},
		{"stable offset stuck below the high watermark", func(s *scenario) {
			s.lagging[tp{"txn", 1}] = true
		}, map[Anomaly]int{Hanging: 1}},
		{"live read taken back", func(s *scenario) {
			s.events = append(s.events, Event{F: Poll, Type: OK, Process: "reader-ru", Isolation: ReadUncommitted, Recs: []Rec{rec("idem", 0, 9, "i1.0:2")}})
		}, map[Anomaly]int{ReadUnstable: 1}},
		{"read_committed consumer given an aborted record", func(s *scenario) {
			s.events = append(s.events, Event{F: Poll, Type: OK, Process: "reader-rc", Isolation: ReadCommitted, Recs: []Rec{rec("txn", 0, 2, "t1.0:1:0")}})
		}, map[Anomaly]int{AbortedRead: 1, ReadUnstable: 1}},
		{"a value nobody sent", func(s *scenario) {
			s.put("idem", 0, 20, "i9.0:0", true)
		}, map[Anomaly]int{Phantom: 1}},
		{"garbage in the log", func(s *scenario) {
			s.put("idem", 0, 20, "garbage", false)
		}, map[Anomaly]int{Phantom: 1}},
		{"a send that certainly failed, in the log", func(s *scenario) {
			s.send("i1.0", "", "idem", 0, -1, "i1.0:3", Fail)
			s.put("idem", 0, 20, "i1.0:3", true)
		}, map[Anomaly]int{Phantom: 1}},
		{"a partition not read to its end", func(s *scenario) {
			s.incomplete[tp{"idem", 0}] = ReadUncommitted
		}, map[Anomaly]int{Unreadable: 1}},
		{"a broker exited by itself", func(s *scenario) {
			s.events = append(s.events, Event{F: Exit, Type: Info, Process: "broker-2", Note: "exit status 1"})
		}, map[Anomaly]int{BrokerExit: 1}},
	}
	covered := map[Anomaly]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := clean()
			if tc.plant != nil {
				tc.plant(s)
			}
			events, f := s.final()
			if tc.plant == nil {
				// read_committed showing a record read_uncommitted lacks
				// cannot be planted through the log (both reads are drawn
				// from it): take the record out of read_uncommitted's read.
				for i, r := range f.Reads {
					if r.Topic == "idem" && r.Isolation == ReadUncommitted {
						f.Reads[i].Records = slices.DeleteFunc(slices.Clone(r.Records), func(r Rec) bool { return r.Value == "i2.0:1" })
					}
				}
			}
			rep := Check(events, f)
			got := map[Anomaly]int{}
			for a, n := range rep.Counts {
				if n > 0 {
					got[a] = n
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v\n%s", got, tc.want, rep.Evidence())
			}
			for a := range tc.want {
				covered[a] = true
				if len(rep.Examples[a]) == 0 {
					t.Errorf("%s counted without an example", a)
				}
			}
			if !strings.Contains(rep.Summary("x"), "FAIL") {
				t.Errorf("summary does not say FAIL: %s", rep.Summary("x"))
			}
		})
	}
	for _, a := range Anomalies {
		if !covered[a] {
			t.Errorf("no case plants %s", a)
		}
	}
}

func TestCheckIsDeterministic(t *testing.T) {
	s := clean()
	s.remove("idem", 0, "i1.0:1", true, true)
	s.setRC("txn", 0, "t2.0:2:0")
	events, f := s.final()
	first := Check(events, f).Evidence()
	for range 20 {
		if again := Check(events, f).Evidence(); again != first {
			t.Fatalf("two checks of one history differ:\n%s\n---\n%s", first, again)
		}
	}
}

func TestValuesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want attr
	}{
		{idempotentValue("i1.2", 7), attr{producer: "i1.2", major: 7}},
		{txnValue(txnID("t2.0", 17), 3), attr{producer: "t2.0", txn: "t2.0:17", major: 17, minor: 3}},
		{outputValue(txnID("c1.0", 4), 1, "t2.0:17:3"), attr{producer: "c1.0", txn: "c1.0:4", major: 4, minor: 1, input: "t2.0:17:3"}},
		{sentinelValue("chaos-txn", 3, 1), attr{producer: "s", sentinel: true}},
	} {
		if got, ok := parseValue(tc.v); !ok || got != tc.want {
			t.Errorf("parseValue(%q) = %+v, %v; want %+v", tc.v, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "i1.0", "i1.0:x", "t1.0:1", "c1.0:1:2", "i1.0:1|t", "i1.0:-1", "q1.0:1"} {
		if a, ok := parseValue(bad); ok {
			t.Errorf("parseValue(%q) = %+v, want refused", bad, a)
		}
	}
}
