package slotlog

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"kaas/storage/vfs/memfs"
)

// owner is a Compactable that counts compactions.
type owner struct {
	l         *Log
	need      bool
	compacted int
}

func (o *owner) NeedsCompaction() bool { return o.need }
func (o *owner) Compact() error {
	o.compacted++
	o.need = false
	return o.l.Rewrite(func(func([]byte) bool) {})
}

// TestGroupSyncsEachLogOnItsOwn: the test goroutine plays the owning
// actor. An eager append starts its log's fsync at the next Flush; an
// append to a log whose fsync is running waits for the next one, which
// starts as soon as that one is back; a lazy append starts none, is
// covered by the next eager fsync of its log, or else by a FlushLazy once
// it is older than the cutoff; only
// the log just synced is compacted; Close answers what is left.
func TestGroupSyncsEachLogOnItsOwn(t *testing.T) {
	f := newGroupFixture(t)
	oa, ob, g, back, deliver, answered, add := f.oa, f.ob, &f.g, f.back, f.deliver, f.answered, f.add
	next := func() *Synced {
		t.Helper()
		select {
		case s := <-back:
			return s
		case <-time.After(30 * time.Second):
			t.Fatal("no fsync came back")
			return nil
		}
	}
	want := func(names ...string) {
		t.Helper()
		if len(answered) != len(names) {
			t.Fatalf("answered %v, want %v", answered, names)
		}
		for _, n := range names {
			if err, ok := answered[n]; !ok || err != nil {
				t.Fatalf("answered %v, want %v", answered, names)
			}
		}
	}

	add(oa, "a1", false)
	add(ob, "b1", true)
	g.Flush(deliver) // starts a's fsync only
	add(oa, "a2", false)
	oa.need, ob.need = true, true
	if err := g.Done(next(), nil, deliver); err != nil {
		t.Fatal(err)
	}
	want("a1")
	if oa.compacted != 0 || ob.compacted != 0 {
		t.Fatal("compacted a log that was not idle, or one that was not synced")
	}
	// a2 did not wait for another Flush: its fsync started in Done.
	if err := g.Done(next(), nil, deliver); err != nil {
		t.Fatal(err)
	}
	want("a1", "a2")
	if oa.compacted != 1 || ob.compacted != 0 {
		t.Fatalf("compactions: a %d, b %d; want only the idle log just synced", oa.compacted, ob.compacted)
	}
	select {
	case s := <-back:
		t.Fatalf("an fsync nothing asked for: %+v", s)
	default:
	}

	add(ob, "b2", false) // covers the lazy b1
	g.Flush(deliver)
	if err := g.Done(next(), nil, deliver); err != nil {
		t.Fatal(err)
	}
	want("a1", "a2", "b1", "b2")

	add(oa, "a3", true)
	g.Flush(deliver) // a lazy append alone starts nothing
	select {
	case s := <-back:
		t.Fatalf("a lazy append started an fsync: %+v", s)
	case <-time.After(10 * time.Millisecond):
	}
	g.FlushLazy(time.Now().Add(-time.Hour), deliver) // a3 is younger: left
	select {
	case s := <-back:
		t.Fatalf("FlushLazy synced a lazy append younger than its cutoff: %+v", s)
	case <-time.After(10 * time.Millisecond):
	}
	g.FlushLazy(time.Now(), deliver)
	if err := g.Done(next(), nil, deliver); err != nil {
		t.Fatal(err)
	}
	want("a1", "a2", "b1", "b2", "a3")

	add(ob, "b3", true)
	add(oa, "a4", false)
	g.Flush(deliver)
	g.Close(nil) // takes a4's fsync in, syncs b3 inline
	want("a1", "a2", "b1", "b2", "a3", "b3", "a4")
	if err := g.Done(next(), nil, deliver); err != nil || g.Pending() != 0 {
		t.Fatalf("a Synced after Close: %v, %d pending", err, g.Pending())
	}
}

// TestGroupFlushStartsOnlyWaitingLogs: Flush starts the logs that got an
// eager append since the last Flush, each once however many appends it
// got, and skips one released in between (its appends were answered by
// Release).
func TestGroupFlushStartsOnlyWaitingLogs(t *testing.T) {
	dir := t.TempDir()
	a, _ := open(t, env(dir), filepath.Join(dir, "a.log"))
	b, _ := open(t, env(dir), filepath.Join(dir, "b.log"))
	c, _ := open(t, env(dir), filepath.Join(dir, "c.log"))
	var g Group
	back := make(chan *Synced, 8)
	deliver := func(s *Synced) { back <- s }
	answered := 0
	for _, l := range []*Log{a, a, b, c} {
		if err := l.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
		g.Wait(&owner{l: l}, l, func(err error) {
			if err != nil {
				t.Errorf("answered %v", err)
			}
			answered++
		})
	}
	g.Release(b, nil) // fsynced inline and answered
	if answered != 1 {
		t.Fatalf("Release answered %d appends, want b's 1", answered)
	}
	g.Flush(deliver)
	synced := map[*Log]int{}
	for range 2 {
		select {
		case s := <-back:
			synced[s.job.l]++
			if err := g.Done(s, nil, deliver); err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no fsync came back")
		}
	}
	if synced[a] != 1 || synced[c] != 1 || answered != 4 {
		t.Fatalf("fsyncs %v (a %p, c %p), %d answered; want one each of a and c, all 4 answered", synced, a, c, answered)
	}
	select {
	case s := <-back:
		t.Fatalf("an fsync nothing asked for: %+v", s)
	case <-time.After(10 * time.Millisecond):
	}
	g.Flush(deliver) // nothing waits: starts nothing
	select {
	case s := <-back:
		t.Fatalf("an empty Flush started an fsync: %+v", s)
	case <-time.After(10 * time.Millisecond):
	}
}

// TestGroupFlushAloneSyncsInline: with one log waiting and no fsync off
// the owner, flushAlone fsyncs it inline and answers its appends (lazy
// ones too) before returning, and compacts it if it is idle and outgrown;
// with two logs waiting, or an fsync running off the owner, it does
// nothing and Flush starts them as before.
func TestGroupFlushAloneSyncsInline(t *testing.T) {
	f := newGroupFixture(t)
	a, oa, ob, g, back, deliver, answered, add := f.a, f.oa, f.ob, &f.g, f.back, f.deliver, f.answered, f.add
	alone := func(want bool) {
		t.Helper()
		ok, err := g.flushAlone(nil)
		if err != nil || ok != want {
			t.Fatalf("flushAlone = %v, %v; want %v", ok, err, want)
		}
	}

	add(oa, "a0", true)
	add(oa, "a1", false)
	oa.need = true
	alone(true)
	if len(answered) != 2 || answered["a0"] != nil || answered["a1"] != nil || a.synced != a.size {
		t.Fatalf("after an inline fsync: answered %v, synced %d of %d", answered, a.synced, a.size)
	}
	if oa.compacted != 1 {
		t.Fatalf("an idle outgrown log synced inline was compacted %d times, want 1", oa.compacted)
	}
	alone(false) // nothing waits

	add(oa, "a2", false)
	add(ob, "b1", false)
	alone(false) // two logs: their fsyncs overlap off the owner
	g.Flush(deliver)
	add(oa, "a3", false)
	alone(false) // b's fsync (or a's) still runs off the owner
	for g.Pending() > 0 {
		if err := g.Done(<-back, nil, deliver); err != nil {
			t.Fatal(err)
		}
	}
	if len(answered) != 5 {
		t.Fatalf("answered %v, want every append", answered)
	}
	add(ob, "b2", false)
	alone(true)
	if answered["b2"] != nil || len(answered) != 6 {
		t.Fatalf("answered %v after the off-owner fsyncs came back", answered)
	}
	select {
	case s := <-back:
		t.Fatalf("an inline fsync delivered a Synced: %+v", s)
	default:
	}
}

// TestGroupFlushIdle: an idle owner's lone fsync runs inline (answered
// before FlushIdle returns, no Synced); a busy owner's runs off it.
func TestGroupFlushIdle(t *testing.T) {
	f := newGroupFixture(t)
	oa, g, back, deliver, answered, add := f.oa, &f.g, f.back, f.deliver, f.answered, f.add

	add(oa, "a0", false)
	if err := g.FlushIdle(true, nil, deliver); err != nil {
		t.Fatal(err)
	}
	if len(answered) != 1 || answered["a0"] != nil {
		t.Fatalf("idle: answered %v, want a0 inline", answered)
	}
	add(oa, "a1", false)
	if err := g.FlushIdle(false, nil, deliver); err != nil {
		t.Fatal(err)
	}
	if len(answered) != 1 {
		t.Fatalf("busy: answered %v before the fsync came back", answered)
	}
	if err := g.Done(<-back, nil, deliver); err != nil {
		t.Fatal(err)
	}
	if len(answered) != 2 || answered["a1"] != nil {
		t.Fatalf("busy: answered %v, want a1 after its Synced", answered)
	}
}

// groupFixture is what the Group tests share: two logs a and b with
// their owners, a Group played by the test goroutine, the channel its
// off-owner fsyncs come back on, and add, which appends name to o's log
// and waits (eagerly or lazily) for its fsync, recording the answer.
type groupFixture struct {
	a, b     *Log
	oa, ob   *owner
	g        Group
	back     chan *Synced
	deliver  func(*Synced)
	answered map[string]error
	add      func(o *owner, name string, lazy bool)
}

func newGroupFixture(t *testing.T) *groupFixture {
	t.Helper()
	dir := t.TempDir()
	f := &groupFixture{back: make(chan *Synced, 8), answered: map[string]error{}}
	f.a, _ = open(t, env(dir), filepath.Join(dir, "a.log"))
	f.b, _ = open(t, env(dir), filepath.Join(dir, "b.log"))
	f.oa, f.ob = &owner{l: f.a}, &owner{l: f.b}
	f.deliver = func(s *Synced) { f.back <- s }
	f.add = func(o *owner, name string, lazy bool) {
		t.Helper()
		if err := o.l.Append([]byte(name)); err != nil {
			t.Fatal(err)
		}
		done := func(err error) { f.answered[name] = err }
		if lazy {
			f.g.WaitLazily(o, o.l, done)
		} else {
			f.g.Wait(o, o.l, done)
		}
	}
	return f
}

// TestGroupFlushEvery: in flush-interval mode an append is answered
// before Wait (or WaitLazily) returns, with no fsync; the first one not
// yet covered asks the owner for a FlushDue after the interval, once;
// FlushDue fsyncs every log written off the owner, and asks again only
// for appends it could not start (their log's fsync was running); Close
// fsyncs what is left.
func TestGroupFlushEvery(t *testing.T) {
	f := newGroupFixture(t)
	oa, ob, g, back, deliver, answered, add := f.oa, f.ob, &f.g, f.back, f.deliver, f.answered, f.add
	var arms []time.Duration
	g.FlushEvery(5*time.Millisecond, func(d time.Duration) { arms = append(arms, d) })

	add(oa, "a1", false)
	add(ob, "b1", true)
	add(oa, "a2", false)
	if len(answered) != 3 || answered["a1"] != nil || answered["b1"] != nil || answered["a2"] != nil {
		t.Fatalf("answered %v, want a1, b1, a2 at once", answered)
	}
	if len(arms) != 1 || arms[0] != 5*time.Millisecond {
		t.Fatalf("asked for FlushDue %v, want once after 5ms", arms)
	}
	g.Flush(deliver) // the eager path starts nothing in this mode
	if g.Unstarted() != 3 {
		t.Fatalf("%d appends wait for an fsync that has not started, want 3", g.Unstarted())
	}
	mustFlushDue(t, g, deliver)
	if g.Unstarted() != 0 || len(arms) != 1 {
		t.Fatalf("after FlushDue: %d unstarted, %d arms; want 0 and still 1", g.Unstarted(), len(arms))
	}
	add(oa, "a3", false) // a's fsync runs: a3 waits for the next round
	if len(arms) != 2 {
		t.Fatalf("a3 asked for no FlushDue (arms %v)", arms)
	}
	for range 2 {
		if err := g.Done(<-back, nil, deliver); err != nil {
			t.Fatal(err)
		}
	}
	if g.Unstarted() != 1 {
		t.Fatalf("a3 started without a FlushDue (%d unstarted)", g.Unstarted())
	}
	size := f.a.Size()
	g.Close(nil)
	if g.Pending() != 0 {
		t.Fatalf("%d appends left after Close", g.Pending())
	}
	if f.a.synced != size {
		t.Fatalf("a durable up to %d of %d after Close", f.a.synced, size)
	}
}

// TestGroupFlushEveryCompacts: in flush-interval mode a log that has
// outgrown its owner's state is fsynced inline at FlushDue and compacted
// there, even with appends arriving all the time (an fsync off the owner
// would always come back with appends behind it, and Done compacts only
// an idle log).
func TestGroupFlushEveryCompacts(t *testing.T) {
	f := newGroupFixture(t)
	oa, g, back, deliver, add := f.oa, &f.g, f.back, f.deliver, f.add
	g.FlushEvery(time.Millisecond, func(time.Duration) {})
	add(oa, "a1", false)
	mustFlushDue(t, g, deliver)
	add(oa, "a2", false) // behind the running fsync
	oa.need = true
	if err := g.Done(<-back, nil, deliver); err != nil {
		t.Fatal(err)
	}
	if oa.compacted != 0 {
		t.Fatal("compacted a log with an append not yet fsynced")
	}
	mustFlushDue(t, g, deliver)
	if oa.compacted != 1 || g.Pending() != 0 {
		t.Fatalf("after FlushDue: %d compactions, %d pending; want 1 and 0", oa.compacted, g.Pending())
	}
	select {
	case s := <-back:
		t.Fatalf("an fsync off the owner for a log compacted inline: %+v", s)
	default:
	}
}

func mustFlushDue(t *testing.T, g *Group, deliver func(*Synced)) {
	t.Helper()
	if err := g.FlushDue(nil, deliver); err != nil {
		t.Fatal(err)
	}
}

// TestGroupFlushEveryCrashLoop: appends answered at once in
// flush-interval mode, FlushDue rounds between them, then a crash at a
// random moment: recovery finds a prefix of what was written, in order,
// holding at least every append a finished FlushDue covered.
func TestGroupFlushEveryCrashLoop(t *testing.T) {
	memfs.Rounds(t, 200, func(t *testing.T, r *rand.Rand) {
		m, l := crashLoopLog(t)
		l.Preallocate()
		o := &owner{l: l}
		var g Group
		g.FlushEvery(time.Millisecond, func(time.Duration) {})
		back := make(chan *Synced, 1)
		deliver := func(s *Synced) { back <- s }
		var written []string
		synced, answered := 0, 0
		for i := 0; i < 5+r.IntN(100); i++ {
			if r.IntN(4) != 0 {
				rec := fmt.Sprintf("%d:%s", i, make([]byte, r.IntN(300)))
				if err := l.Append([]byte(rec)); err != nil {
					t.Fatal(err)
				}
				written = append(written, rec)
				g.Wait(o, l, func(err error) {
					if err != nil {
						t.Fatal(err)
					}
					answered++
				})
				continue
			}
			covered := len(written)
			mustFlushDue(t, &g, deliver)
			if g.Pending() > 0 {
				if err := g.Done(<-back, nil, deliver); err != nil {
					t.Fatal(err)
				}
				synced = covered
			}
		}
		if answered != len(written) {
			t.Fatalf("answered %d of %d appends", answered, len(written))
		}
		checkCrashRecovery(t, m.Crash(memfs.CrashOptions{Rand: r}), synced, written)
	})
}

// TestGroupTimesTheFsyncNotItsAnswers: the duration synced reports ends
// before the appends' answers run (a share fetch's answer writes its
// records to a socket, often longer than the fsync): an fsync whose
// answer takes slow reports at most the time around it less slow, inline
// (FlushIdle) and off the owner (Done) alike.
func TestGroupTimesTheFsyncNotItsAnswers(t *testing.T) {
	const slow = 20 * time.Millisecond
	f := newGroupFixture(t)
	g, back, deliver := &f.g, f.back, f.deliver
	for _, inline := range []bool{true, false} {
		if err := f.a.Append([]byte("x")); err != nil {
			t.Fatal(err)
		}
		g.Wait(f.oa, f.a, func(error) { time.Sleep(slow) }) // the answer's slow socket write
		var took []time.Duration
		synced := func(d time.Duration, _ int) { took = append(took, d) }
		t0 := time.Now()
		if err := g.FlushIdle(inline, synced, deliver); err != nil {
			t.Fatal(err)
		}
		if !inline {
			if err := g.Done(<-back, synced, deliver); err != nil {
				t.Fatal(err)
			}
		}
		around := time.Since(t0)
		if len(took) != 1 || took[0] > around-slow {
			t.Fatalf("inline %v: synced reported %v for an fsync whose %v answer ran within %v: the answer was timed too", inline, took, slow, around)
		}
	}
}
