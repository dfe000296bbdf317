package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Anomaly is a kind of wrong the checker can prove.
type Anomaly string

const (
	// Lost: an acknowledged record is not in the log.
	Lost Anomaly = "lost"
	// Duplicate: a value is in the log more than once.
	Duplicate Anomaly = "duplicate"
	// WrongOffset: an acknowledged record is in the log, but not at the
	// offset its acknowledgement gave.
	WrongOffset Anomaly = "wrong-offset"
	// Order: a client's records on one partition are out of the order it
	// sent them in.
	Order Anomaly = "order"
	// TxnIncomplete: a committed transaction whose acknowledged records
	// are not all visible to read_committed.
	TxnIncomplete Anomaly = "txn-incomplete"
	// AbortedVisible: an aborted transaction (or one never asked to
	// commit) with a record visible to read_committed.
	AbortedVisible Anomaly = "aborted-visible"
	// Torn: a transaction of unknown outcome partly visible.
	Torn Anomaly = "torn"
	// CommittedNotUncommitted: read_committed shows a record
	// read_uncommitted does not have at that offset.
	CommittedNotUncommitted Anomaly = "rc-not-in-ru"
	// CommittedMissing: a record read_committed must show (not
	// transactional, or of a committed transaction) that it does not.
	CommittedMissing Anomaly = "rc-missing"
	// EOSMissing: an input below the exactly-once group's committed
	// offset with no output.
	EOSMissing Anomaly = "eos-missing"
	// EOSDuplicate: an input with more than one output.
	EOSDuplicate Anomaly = "eos-duplicate"
	// EOSOrphan: an output whose input is not a committed, consumed
	// input (beyond the committed offset, aborted, or unknown).
	EOSOrphan Anomaly = "eos-orphan"
	// Hanging: a transaction still open once everything settled, or a
	// partition whose last stable offset stays below its high watermark.
	Hanging Anomaly = "hanging"
	// ReadUnstable: a live consumer read a record that the final read does
	// not show at that offset (it saw bytes that were later taken back).
	ReadUnstable Anomaly = "read-unstable"
	// AbortedRead: a read_committed consumer was given a record of an
	// aborted transaction.
	AbortedRead Anomaly = "aborted-read"
	// Phantom: the log holds a value no client sent (or one whose send
	// certainly failed).
	Phantom Anomaly = "phantom"
	// Unreadable: the final read could not reach a partition's end.
	Unreadable Anomaly = "unreadable"
	// BrokerExit: a broker exited by itself.
	BrokerExit Anomaly = "broker-exit"
)

// Anomalies lists every kind, in the order the summary gives them.
var Anomalies = []Anomaly{Lost, Duplicate, WrongOffset, Order, TxnIncomplete, AbortedVisible, Torn,
	CommittedNotUncommitted, CommittedMissing, EOSMissing, EOSDuplicate, EOSOrphan, Hanging,
	ReadUnstable, AbortedRead, Phantom, Unreadable, BrokerExit}

// maxExamples bounds the evidence kept per anomaly kind.
const maxExamples = 8

// Report is what Check found.
type Report struct {
	Counts   map[Anomaly]int
	Examples map[Anomaly][]string
	Stats    Stats
}

// Stats are the run's figures, for the summary.
type Stats struct {
	Faults map[string]int
	// Sends by the workloads (sentinels not counted): acknowledged, and
	// of unknown outcome.
	Sends, Acked, UnknownSends int
	// Transactions of the transactional producers, by outcome.
	Committed, Aborted, Unknown int
	// Transactions of the exactly-once group, by outcome.
	EOSCommitted, EOSAborted, EOSUnknown int
	// Records read by the live consumers, and in the final
	// read_uncommitted read.
	Polled, Final int
}

// Total is the number of anomalies found.
func (r Report) Total() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

func (r *Report) add(a Anomaly, format string, args ...any) { r.addN(a, 1, format, args...) }

// addN counts n anomalies of one kind with one example.
func (r *Report) addN(a Anomaly, n int, format string, args ...any) {
	r.Counts[a] += n
	if len(r.Examples[a]) < maxExamples {
		r.Examples[a] = append(r.Examples[a], fmt.Sprintf(format, args...))
	}
}

// Transaction outcomes.
const (
	committed = "committed"
	aborted   = "aborted"
	unknown   = "unknown"
)

type send struct {
	rec     Rec // where it was sent; Offset is the acknowledged one
	acked   bool
	failed  bool // certainly not written
	process string
}

type txn struct {
	id      string
	sends   []*send
	intent  string // "" when no End was invoked
	outcome string
	inputs  []Rec
	eos     bool
}

type liveRead struct {
	iso string
	rec Rec
	by  string
}

// view is the final read at one isolation level.
type view struct {
	reads map[tp]*PartitionRead
	at    map[tp]map[int64]string
	where map[string][]Rec
}

func newView(f Final, iso string) view {
	v := view{reads: map[tp]*PartitionRead{}, at: map[tp]map[int64]string{}, where: map[string][]Rec{}}
	for i := range f.Reads {
		r := &f.Reads[i]
		if r.Isolation != iso {
			continue
		}
		k := tp{r.Topic, r.Partition}
		v.reads[k] = r
		at := map[int64]string{}
		for _, rec := range r.Records {
			at[rec.Offset] = rec.Value
			v.where[rec.Value] = append(v.where[rec.Value], rec)
		}
		v.at[k] = at
	}
	return v
}

func (v view) complete(k tp) bool {
	r := v.reads[k]
	return r != nil && r.Complete
}

func (v view) has(r Rec) bool {
	val, ok := v.at[r.tp()][r.Offset]
	return ok && val == r.Value
}

// Check reads a history and the final reads and reports every anomaly it
// can prove. It is a pure function: the same input gives the same report.
func Check(events []Event, final Final) Report {
	rep := Report{Counts: map[Anomaly]int{}, Examples: map[Anomaly][]string{}, Stats: Stats{Faults: map[string]int{}}}
	sends := map[string]*send{}
	txns := map[string]*txn{}
	sendOps := map[int64]*send{}
	endOps := map[int64]*txn{}
	var live []liveRead
	getTxn := func(id string) *txn {
		t := txns[id]
		if t == nil {
			t = &txn{id: id, outcome: unknown, eos: strings.HasPrefix(id, "c")}
			txns[id] = t
		}
		return t
	}
	for _, e := range events {
		switch e.F {
		case Send:
			if e.Type == Invoke {
				if e.Rec == nil {
					continue
				}
				s := &send{rec: *e.Rec, process: e.Process}
				s.rec.Offset = -1
				sendOps[e.ID] = s
				if _, dup := sends[s.rec.Value]; !dup {
					sends[s.rec.Value] = s
				}
				if e.Txn != "" {
					t := getTxn(e.Txn)
					t.sends = append(t.sends, s)
				}
				continue
			}
			s := sendOps[e.ID]
			if s == nil {
				continue
			}
			switch e.Type {
			case OK:
				s.acked = true
				if e.Rec != nil {
					s.rec.Offset = e.Rec.Offset
				}
			case Fail:
				s.failed = true
			}
		case End:
			if e.Type == Invoke {
				t := getTxn(e.Txn)
				t.intent, t.inputs = e.Intent, e.Recs
				endOps[e.ID] = t
				for _, r := range e.Recs {
					live = append(live, liveRead{ReadCommitted, r, e.Process + " (consumed by " + e.Txn + ")"})
				}
				continue
			}
			t := endOps[e.ID]
			if t == nil {
				continue
			}
			switch {
			case e.Type == OK && t.intent == Commit:
				t.outcome = committed
			case e.Type == OK || e.Type == Fail:
				t.outcome = aborted
			default:
				t.outcome = unknown
			}
		case Poll:
			for _, r := range e.Recs {
				live = append(live, liveRead{e.Isolation, r, e.Process})
			}
		case Fault:
			if e.Type == Invoke {
				rep.Stats.Faults[e.Value]++
			}
		case Exit:
			rep.add(BrokerExit, "%s at %v: %s %s", e.Process, e.Time.Round(1e6), e.Note, e.Err)
		}
	}
	ru, rc := newView(final, ReadUncommitted), newView(final, ReadCommitted)

	for _, s := range sorted(sends) {
		if strings.HasPrefix(s.rec.Value, "s:") {
			continue
		}
		rep.Stats.Sends++
		switch {
		case s.acked:
			rep.Stats.Acked++
		case !s.failed:
			rep.Stats.UnknownSends++
		}
	}
	for _, t := range sorted(txns) {
		n := [3]*int{&rep.Stats.Committed, &rep.Stats.Aborted, &rep.Stats.Unknown}
		if t.eos {
			n = [3]*int{&rep.Stats.EOSCommitted, &rep.Stats.EOSAborted, &rep.Stats.EOSUnknown}
		}
		switch t.outcome {
		case committed:
			*n[0]++
		case aborted:
			*n[1]++
		default:
			*n[2]++
		}
	}
	rep.Stats.Polled = len(live)
	for _, r := range ru.reads {
		rep.Stats.Final += len(r.Records)
	}

	checkPhantoms(&rep, sends, ru, rc)
	checkLog(&rep, sends, ru)
	checkTxns(&rep, txns, ru, rc)
	checkIsolation(&rep, txns, ru, rc)
	checkEOS(&rep, final, ru, rc, sends)
	checkLive(&rep, live, txns, ru, rc)
	checkSettled(&rep, final)
	return rep
}

// checkPhantoms: every value in the log was sent, and not certainly
// refused.
func checkPhantoms(rep *Report, sends map[string]*send, views ...view) {
	seen := map[string]bool{}
	for _, v := range views {
		for _, val := range sortedKeys(v.where) {
			if seen[val] {
				continue
			}
			seen[val] = true
			s := sends[val]
			_, parses := parseValue(val)
			switch {
			case !parses || s == nil:
				rep.add(Phantom, "%s: no client sent it", v.where[val][0])
			case s.failed:
				rep.add(Phantom, "%s: in the log although its send certainly failed", v.where[val][0])
			}
		}
	}
}

// checkLog: acknowledged records are in read_uncommitted once, at their
// offset, and each client's records on a partition are in its order.
func checkLog(rep *Report, sends map[string]*send, ru view) {
	for _, val := range sortedKeys(ru.where) {
		if at := ru.where[val]; len(at) > 1 {
			rep.addN(Duplicate, len(at)-1, "%q %d times: %v", val, len(at), at)
		}
	}
	for _, s := range sorted(sends) {
		if !s.acked || !ru.complete(s.rec.tp()) {
			continue
		}
		at := ru.where[s.rec.Value]
		switch {
		case len(at) == 0:
			held := "nothing"
			if v, ok := ru.at[s.rec.tp()][s.rec.Offset]; ok {
				held = fmt.Sprintf("%q", v)
			}
			rep.add(Lost, "%s acknowledged by %s, not in the log (that offset holds %s)", s.rec, s.process, held)
		case !ru.has(s.rec):
			rep.add(WrongOffset, "%s acknowledged, found at %v", s.rec, at)
		}
	}
	for _, k := range sortedTPs(ru.reads) {
		last := map[string]attr{}
		lastRec := map[string]Rec{}
		for _, r := range ru.reads[k].Records {
			a, ok := parseValue(r.Value)
			if !ok || a.sentinel {
				continue
			}
			if p, seen := last[a.producer]; seen && (a.major < p.major || a.major == p.major && a.minor < p.minor) {
				rep.add(Order, "%s after %s: %s sent them the other way round", r, lastRec[a.producer], a.producer)
			}
			last[a.producer], lastRec[a.producer] = a, r
		}
	}
}

// checkTxns: committed transactions are wholly visible to read_committed,
// aborted ones (and those never asked to commit) not at all, and those of
// unknown outcome wholly or not at all.
func checkTxns(rep *Report, txns map[string]*txn, ru, rc view) {
	for _, t := range sorted(txns) {
		readable := true
		for _, s := range t.sends {
			readable = readable && rc.complete(s.rec.tp()) && ru.complete(s.rec.tp())
		}
		if !readable {
			continue
		}
		var visible, missing []string
		for _, s := range t.sends {
			if at := rc.where[s.rec.Value]; len(at) > 0 {
				visible = append(visible, at[0].String())
			} else if s.acked {
				missing = append(missing, s.rec.String())
			}
		}
		switch {
		case t.outcome == committed:
			if len(missing) > 0 {
				rep.add(TxnIncomplete, "%s committed; not visible to read_committed: %v (visible: %v)", t.id, missing, visible)
			}
		case t.outcome == aborted || t.intent != Commit:
			if len(visible) > 0 {
				how := "aborted"
				if t.outcome != aborted {
					how = "never asked to commit (intent " + cmp.Or(t.intent, "none") + ", outcome " + t.outcome + ")"
				}
				rep.add(AbortedVisible, "%s %s; visible to read_committed: %v", t.id, how, visible)
			}
		default: // a commit of unknown outcome
			if len(visible) > 0 && len(missing) > 0 {
				rep.add(Torn, "%s (commit of unknown outcome) partly visible: %v visible, %v not", t.id, visible, missing)
			}
		}
	}
}

// checkIsolation: read_committed shows only what read_uncommitted has at
// the same offset, and everything it must show.
func checkIsolation(rep *Report, txns map[string]*txn, ru, rc view) {
	for _, k := range sortedTPs(rc.reads) {
		if !ru.complete(k) {
			continue
		}
		for _, r := range rc.reads[k].Records {
			if !ru.has(r) {
				held := "nothing"
				if v, ok := ru.at[k][r.Offset]; ok {
					held = fmt.Sprintf("%q", v)
				}
				rep.add(CommittedNotUncommitted, "read_committed has %s; read_uncommitted has %s there", r, held)
			}
		}
	}
	for _, k := range sortedTPs(ru.reads) {
		if !rc.complete(k) {
			continue
		}
		for _, r := range ru.reads[k].Records {
			a, ok := parseValue(r.Value)
			if !ok {
				continue
			}
			must := a.txn == ""
			if t := txns[a.txn]; t != nil && t.outcome == committed {
				must = true
			}
			if must && !rc.has(r) {
				why := "not transactional"
				if a.txn != "" {
					why = a.txn + " committed"
				}
				rep.add(CommittedMissing, "%s (%s) not visible to read_committed", r, why)
			}
		}
	}
}

// checkEOS: each input the exactly-once group consumed (below its
// committed offset) has exactly one output visible to read_committed,
// and no other output is visible.
func checkEOS(rep *Report, f Final, ru, rc view, sends map[string]*send) {
	if f.InputTopic == "" {
		return
	}
	outputs := map[string][]Rec{}
	outTopics := map[string]bool{}
	for _, s := range sends {
		if a, ok := parseValue(s.rec.Value); ok && a.input != "" {
			outTopics[s.rec.Topic] = true
		}
	}
	for k, r := range rc.reads {
		if outTopics[k.topic] && !r.Complete {
			return // cannot count outputs; unreadable reports it
		}
	}
	for _, k := range sortedTPs(rc.reads) {
		for _, r := range rc.reads[k].Records {
			if a, ok := parseValue(r.Value); ok && a.input != "" {
				outputs[a.input] = append(outputs[a.input], r)
			}
		}
	}
	committedAt := map[tp]int64{}
	for _, o := range f.GroupOffsets {
		committedAt[o.tp()] = o.Offset
	}
	consumed := map[string]bool{}
	for _, k := range sortedTPs(rc.reads) {
		if k.topic != f.InputTopic {
			continue
		}
		pr := rc.reads[k]
		for _, r := range pr.Records {
			a, ok := parseValue(r.Value)
			if !ok || a.sentinel {
				continue
			}
			out := outputs[r.Value]
			if r.Offset < committedAt[k] {
				consumed[r.Value] = true
				switch {
				case len(out) == 0 && pr.Complete:
					rep.add(EOSMissing, "input %s is below %s's committed offset %d and has no output", r, f.Group, committedAt[k])
				case len(out) > 1:
					rep.add(EOSDuplicate, "input %s has %d outputs: %v", r, len(out), out)
				}
			}
		}
	}
	for _, in := range sortedKeys(outputs) {
		if consumed[in] {
			continue
		}
		why := "not visible to read_committed in " + f.InputTopic
		if at := rc.where[in]; len(at) > 0 {
			why = fmt.Sprintf("at %v, not below %s's committed offset %d", at[0], f.Group, committedAt[at[0].tp()])
		}
		rep.add(EOSOrphan, "outputs %v of input %q, which is %s", outputs[in], in, why)
	}
}

// checkLive: what a consumer read during the run is still there, and
// read_committed consumers never got a record of an aborted transaction.
func checkLive(rep *Report, live []liveRead, txns map[string]*txn, ru, rc view) {
	for _, l := range live {
		v := ru
		if l.iso == ReadCommitted {
			v = rc
		}
		if v.complete(l.rec.tp()) && !v.has(l.rec) {
			held := "nothing"
			if val, ok := v.at[l.rec.tp()][l.rec.Offset]; ok {
				held = fmt.Sprintf("%q", val)
			}
			rep.add(ReadUnstable, "%s read %s (%s); the final read has %s there", l.by, l.rec, l.iso, held)
		}
		if l.iso != ReadCommitted {
			continue
		}
		a, ok := parseValue(l.rec.Value)
		if !ok || a.txn == "" {
			continue
		}
		if t := txns[a.txn]; t != nil && (t.outcome == aborted || t.intent != Commit) {
			rep.add(AbortedRead, "%s read %s with read_committed; %s %s", l.by, l.rec, a.txn, cmp.Or(t.outcome, "never asked to commit"))
		}
	}
}

// checkSettled: once everything settled, no transaction is open, every
// partition's stable offset reached its high watermark, and every
// partition could be read to its end.
func checkSettled(rep *Report, f Final) {
	for _, o := range f.Open {
		rep.add(Hanging, "transaction %s still open after the settle", o)
	}
	for _, r := range f.Reads {
		if !r.Complete {
			rep.add(Unreadable, "%s/%d (%s): the read stopped before the partition's sentinel: %s", r.Topic, r.Partition, r.Isolation, cmp.Or(r.Err, "no error"))
		}
		if r.Isolation == ReadCommitted && r.StableOffset < r.HighWatermark {
			rep.add(Hanging, "%s/%d: last stable offset %d stays below the high watermark %d", r.Topic, r.Partition, r.StableOffset, r.HighWatermark)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sorted returns a map's values in key order (the report is the same on
// every run over the same history).
func sorted[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

func sortedTPs[V any](m map[tp]V) []tp {
	keys := make([]tp, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	return keys
}
