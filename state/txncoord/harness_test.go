package txncoord

// The test world: entries written in the spec's notation, a PID
// allocator, and a driver that carries out every Step the machine returns
// (writes, fences, markers, callbacks) until nothing is outstanding,
// recording what it did in order.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"kaas/model"
	"kaas/model/txnstate"
)

// Producer ids as the spec names them: P and Q exist, M is the first one
// the allocator hands out (M2 the next).
const (
	pidP = int64(1000)
	pidQ = int64(2000)
	pidM = int64(5000)
)

var pidNames = map[string]int64{"P": pidP, "Q": pidQ, "M": pidM, "M2": pidM + 1}

func pidName(pid int64) string {
	for n, v := range pidNames {
		if v == pid {
			return n
		}
	}
	return strconv.FormatInt(pid, 10)
}

var (
	now0    = time.UnixMilli(1_700_000_000_000)
	errDisk = errors.New("injected write failure")
)

// ent parses the spec's entry notation ⟨pid,epoch,lastPid,lastEpoch,State,{tps}⟩
// (partitions "a-0 a-1" space separated; "" means no entry).
func ent(t testing.TB, s string) (txnstate.Entry, bool) {
	t.Helper()
	if s == "" {
		return txnstate.Entry{}, false
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "⟨"), "⟩")
	tps := ""
	if i := strings.Index(s, ",{"); i >= 0 {
		tps = strings.TrimSuffix(s[i+2:], "}")
		s = s[:i]
	}
	f := strings.Split(s, ",")
	if len(f) != 5 {
		t.Fatalf("bad entry %q", s)
	}
	num := func(x string) int64 {
		if v, ok := pidNames[x]; ok {
			return v
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			t.Fatalf("bad number %q", x)
		}
		return n
	}
	e := txnstate.Entry{TransactionalID: "t", ProducerID: num(f[0]), Epoch: int16(num(f[1])),
		LastProducerID: num(f[2]), LastEpoch: int16(num(f[3])), TimeoutMs: 60000, TxnStartMs: -1}
	found := false
	for st := txnstate.Empty; st <= txnstate.PrepareEpochFence; st++ {
		if st.String() == f[4] {
			e.State, found = st, true
		}
	}
	if !found {
		t.Fatalf("bad state %q", f[4])
	}
	for _, tp := range strings.Fields(tps) {
		i := strings.LastIndexByte(tp, '-')
		p, _ := strconv.Atoi(tp[i+1:])
		e.Partitions = append(e.Partitions, model.TopicPartition{Topic: tp[:i], Partition: int32(p)})
	}
	if e.State == txnstate.Ongoing || e.State.IsPrepare() {
		e.TxnStartMs = now0.Add(-time.Second).UnixMilli()
	}
	return e, true
}

// show writes an entry in the spec's notation.
func show(e txnstate.Entry, exists bool) string {
	if !exists {
		return ""
	}
	var tps []string
	for _, tp := range e.Partitions {
		tps = append(tps, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	s := fmt.Sprintf("⟨%s,%d,%s,%d,%s", pidName(e.ProducerID), e.Epoch, pidName(e.LastProducerID), e.LastEpoch, e.State)
	if len(tps) > 0 {
		s += ",{" + strings.Join(tps, " ") + "}"
	}
	return s + "⟩"
}

func load(t testing.TB, s string) *Txn {
	t.Helper()
	e, ok := ent(t, s)
	return New("t", e, ok, nil)
}

// pids is the allocator: M, M2, ...
type pids struct {
	next  int64
	calls int
	err   error
}

func newPIDs() *pids { return &pids{next: pidM} }

func (p *pids) Next() (int64, error) {
	p.calls++
	if p.err != nil {
		return 0, p.err
	}
	p.next++
	return p.next - 1, nil
}

// world carries out Steps. By default every write, fence and marker
// succeeds; the hooks make them fail.
type world struct {
	t          testing.TB
	now        time.Time
	persistErr func(e txnstate.Entry) error
	fenceErr   error
	// endFenceErr fails end fences; holdEndFence leaves them unanswered.
	endFenceErr  error
	holdEndFence bool
	markerCode   func(m Marker) int16
	// hold leaves markers unanswered (held) instead of answering them.
	hold bool
	held []Marker

	trace   []string // every effect, in order
	answers []Answer
	writes  []txnstate.Entry
	events  []Event
	bumps   []Bump
	queue   []func() Step
	// deferComplete queues the Complete* tick like any Later instead of
	// firing it at once.
	deferComplete bool
}

func newWorld(t testing.TB) *world { return &world{t: t, now: now0} }

// drive carries out s and everything that follows from it.
func (w *world) drive(tx *Txn, s Step) {
	w.t.Helper()
	w.push(tx, s)
	for n := 0; len(w.queue) > 0; n++ {
		if n > 10000 {
			w.t.Fatalf("the transition never settles: %v", w.trace)
		}
		next := w.queue[0]
		w.queue = w.queue[1:]
		w.push(tx, next())
	}
}

func (w *world) push(tx *Txn, s Step) {
	w.events = append(w.events, s.Events...)
	if s.Bump != nil {
		w.bumps = append(w.bumps, *s.Bump)
	}
	if f := s.Fence; f != nil {
		w.trace = append(w.trace, fmt.Sprintf("fence (%s,%d)", pidName(f.ProducerID), f.Epoch))
		err := w.fenceErr
		w.queue = append(w.queue, func() Step { return tx.FenceDone(err, w.now) })
	}
	if f := s.EndFence; f != nil {
		var where []string
		for _, tp := range f.Partitions {
			where = append(where, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
		}
		w.trace = append(w.trace, fmt.Sprintf("end-fence (%s,%d) %s", pidName(f.ProducerID), f.Epoch, strings.Join(where, " ")))
		if !w.holdEndFence {
			err, seq := w.endFenceErr, f.Seq
			w.queue = append(w.queue, func() Step { return tx.EndFenceDone(seq, err) })
		}
	}
	if f := s.EndFenceDrop; f != nil {
		w.trace = append(w.trace, fmt.Sprintf("end-fence drop (%s,%d)", pidName(f.ProducerID), f.Epoch))
	}
	if e := s.Persist; e != nil {
		w.trace = append(w.trace, "write "+show(*e, true))
		w.writes = append(w.writes, *e)
		var err error
		if w.persistErr != nil {
			err = w.persistErr(*e)
		}
		if s.Unconfirmed {
			w.queue = append(w.queue, func() Step { return tx.UnconfirmedDone(err) })
		} else {
			w.queue = append(w.queue, func() Step { return tx.PersistDone(err, w.now) })
		}
	}
	if s.Delete {
		w.trace = append(w.trace, "delete")
		w.queue = append(w.queue, func() Step { return tx.PersistDone(nil, w.now) })
	}
	for _, m := range s.Markers {
		w.trace = append(w.trace, showMarker(m))
		if w.hold {
			w.held = append(w.held, m)
			continue
		}
		code := int16(0)
		if w.markerCode != nil {
			code = w.markerCode(m)
		}
		w.queue = append(w.queue, func() Step { return tx.MarkerDone(m.Round, m.Key, code, w.now) })
	}
	if l := s.Later; l != nil && l.Tick.Complete && !w.deferComplete {
		// No next transition comes within CompleteDelay: the Complete*
		// is written on its own, here, where it was written at once
		// before it waited (TestCompleteWaitsForTheNextTransition
		// covers the wait).
		w.push(tx, tx.Fire(l.Tick, w.now))
	} else if l != nil {
		w.trace = append(w.trace, fmt.Sprintf("later %v", l.After))
		tick := l.Tick
		w.queue = append(w.queue, func() Step { return tx.Fire(tick, w.now) })
	}
	if a := s.Answer; a != nil {
		w.answers = append(w.answers, *a)
		w.trace = append(w.trace, "answer "+showAnswer(*a))
	}
}

// release answers the held markers with NONE.
func (w *world) release(tx *Txn) {
	held := w.held
	w.held, w.hold = nil, false
	for _, m := range held {
		w.drive(tx, tx.MarkerDone(m.Round, m.Key, 0, w.now))
	}
}

func showMarker(m Marker) string {
	kind := "ABORT"
	if m.Commit {
		kind = "COMMIT"
	}
	where := fmt.Sprintf("%s-%d", m.Key.TP.Topic, m.Key.TP.Partition)
	if m.Key.Groups {
		where = "groups " + strings.Join(m.Groups, " ")
	}
	return fmt.Sprintf("marker %s %s (%s,%d)", kind, where, pidName(m.ProducerID), m.Epoch)
}

func showAnswer(a Answer) string {
	s := strconv.Itoa(int(a.Code))
	if a.ProducerID != 0 || a.Epoch != 0 {
		s += fmt.Sprintf(" (%s,%d)", pidName(a.ProducerID), a.Epoch)
	}
	if a.Partitions != nil {
		s += fmt.Sprintf(" %v", a.Partitions)
	}
	return s
}

// only returns the single answer the world saw.
func (w *world) only() Answer {
	w.t.Helper()
	if len(w.answers) != 1 {
		w.t.Fatalf("answers %v, want exactly one (trace %q)", w.answers, w.trace)
	}
	return w.answers[0]
}

func (w *world) traced(kind string) []string {
	var out []string
	for _, s := range w.trace {
		if strings.HasPrefix(s, kind) {
			out = append(out, s)
		}
	}
	return out
}

// tps parses "a-0 a-1".
func tps(s string) []model.TopicPartition {
	var out []model.TopicPartition
	for _, tp := range strings.Fields(s) {
		i := strings.LastIndexByte(tp, '-')
		p, _ := strconv.Atoi(tp[i+1:])
		out = append(out, model.TopicPartition{Topic: tp[:i], Partition: int32(p)})
	}
	return out
}
