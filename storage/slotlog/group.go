package slotlog

import (
	"errors"
	"sync"
	"time"
)

// Group is group commit over several logs, for the one actor that owns
// them: each append registers what to do once it is durable; Flush starts
// an fsync, off the actor, of every log written since its last one that
// has none running; each fsync comes back to the actor as a *Synced (Done),
// which answers the appends it covered with its log's outcome (nil, or the
// failure that took the log offline) and starts that log's next fsync at
// once if appends arrived meanwhile.
//
// Each log is its own file (a slot the cluster may give to another
// broker), so a round over n logs is n fsyncs whatever we do; what Group
// avoids is making them wait for each other. Run as one round, every
// append waited for the slowest file of the round in progress and then
// for its own round (the actor blocked on the fsyncs, appends queued in
// its mailbox); now a log's fsync starts as soon as the log is written
// and its previous fsync is done, and the device serves the logs' fsyncs
// concurrently (32 files: 33 ms one after another, 4.4 ms all at once on
// this machine's ext4).
type Group struct {
	logs map[*Log]*logState
	// ready lists the logs that got an eager append since the last
	// Flush, so Flush looks at those rather than at every log the actor
	// owns (50 slots: the walk was a share of each transaction's CPU).
	ready   []*Log
	running sync.WaitGroup
	// started is how many fsyncs started off the actor are not finished
	// yet (the owner's own count: flushAlone reads it without a lock).
	started int
	// interval > 0 is the flush-interval mode (FlushEvery); arm asks the
	// owner for a FlushDue after a delay, armed says one is on its way.
	interval time.Duration
	arm      func(after time.Duration)
	armed    bool
}

type logState struct {
	// waiting: appends since the fsync running now started (or all of
	// them when none runs); covering: the appends the running fsync
	// covers.
	waiting  []func(error)
	covering []func(error)
	// eager: an append in waiting wants its fsync now (not only lazy
	// ones, see WaitLazily).
	eager bool
	// listed: the log is in Group.ready.
	listed bool
	// since: when the oldest append in waiting was registered (FlushLazy
	// leaves younger lazy ones to an eager append that may come).
	since time.Time
	owner Compactable
	job   *syncJob // the fsync running off the actor, nil when none
	start time.Time
}

// Synced is one finished fsync, to hand to Done inside the actor.
type Synced struct{ job *syncJob }

// Compactable is what a log holds (a slot's state): it knows when the log
// has outgrown it and rewrites it (Log.Rewrite).
type Compactable interface {
	NeedsCompaction() bool
	Compact() error
}

// FlushEvery puts the group in flush-interval mode (--flush-interval-ms,
// Apache's log.flush.interval.ms, which applies to every log, the
// transaction state and consumer offsets included): Wait and WaitLazily
// answer an append at once, since it is written (in the page cache), and
// its log is fsynced off the owner within d of the first append not yet
// covered. arm must deliver a message to the owner after the delay it is
// given, on which the owner calls FlushDue. The order of the appends in
// each log is kept; that they survive a power loss before their fsync is
// the operator's choice, as for the partition logs in this mode. A failed
// fsync is still final for its log (later appends fail). d <= 0 leaves
// the group as it is: every append answered once fsynced.
func (g *Group) FlushEvery(d time.Duration, arm func(after time.Duration)) {
	if d > 0 {
		g.interval, g.arm = d, arm
	}
}

// Interval is FlushEvery's interval, 0 when every append waits for its
// fsync.
func (g *Group) Interval() time.Duration { return g.interval }

// FlushDue starts the fsyncs the flush-interval mode owes: of every log
// with appends not covered yet and no fsync running. Those behind a
// running fsync get the next round.
//
// A log that has outgrown its owner's state is fsynced inline instead
// and compacted at once: compaction needs the log idle (Done compacts
// only then), and under a steady stream of appends answered at once an
// fsync off the owner always comes back with appends behind it, so the
// log would never be compacted. The error is the compaction's (the log
// is then offline).
func (g *Group) FlushDue(synced func(time.Duration, int), deliver func(*Synced)) error {
	g.armed = false
	var errs []error
	for l, ls := range g.logs {
		if ls.job != nil || len(ls.waiting) == 0 {
			continue
		}
		if ls.owner == nil || !ls.owner.NeedsCompaction() {
			g.start(l, ls, deliver)
			continue
		}
		if j := g.begin(l, ls); j != nil {
			j.run()
			g.finish(l, ls, synced)
		}
		errs = append(errs, g.compactIfIdle(ls))
	}
	g.armInterval()
	return errors.Join(errs...)
}

// answerNow answers an append in flush-interval mode and leaves a
// placeholder for the fsync it is owed (so Close and Release still fsync
// it before the log closes).
func (g *Group) answerNow(owner Compactable, l *Log, done func(error)) {
	g.state(owner, l).wait(func(error) {})
	done(l.Failed())
	g.armInterval()
}

func (g *Group) armInterval() {
	if g.armed || g.Unstarted() == 0 {
		return
	}
	g.armed = true
	g.arm(g.interval)
}

// Wait registers done for an append to owner's log l that succeeded;
// Flush starts its fsync. In flush-interval mode (FlushEvery) done is
// called before Wait returns.
func (g *Group) Wait(owner Compactable, l *Log, done func(error)) {
	if g.interval > 0 {
		g.answerNow(owner, l, done)
		return
	}
	ls := g.state(owner, l)
	ls.wait(done)
	ls.eager = true
	if !ls.listed {
		ls.listed = true
		g.ready = append(g.ready, l)
	}
}

// WaitLazily registers done for an append nothing waits for: it becomes
// durable with the next fsync of l that an eager append (Wait) asks for,
// or at the latest at the first FlushLazy that finds it old enough. In
// flush-interval mode it is Wait.
func (g *Group) WaitLazily(owner Compactable, l *Log, done func(error)) {
	if g.interval > 0 {
		g.answerNow(owner, l, done)
		return
	}
	g.state(owner, l).wait(done)
}

func (ls *logState) wait(done func(error)) {
	if len(ls.waiting) == 0 {
		ls.since = time.Now()
	}
	ls.waiting = append(ls.waiting, done)
}

func (g *Group) state(owner Compactable, l *Log) *logState {
	if g.logs == nil {
		g.logs = map[*Log]*logState{}
	}
	ls := g.logs[l]
	if ls == nil {
		ls = &logState{}
		g.logs[l] = ls
	}
	ls.owner = owner
	return ls
}

// Unstarted is how many appends wait for an fsync that has not started.
func (g *Group) Unstarted() int {
	n := 0
	for _, ls := range g.logs {
		n += len(ls.waiting)
	}
	return n
}

// Pending is how many appends wait for an fsync, running or not.
func (g *Group) Pending() int {
	n := 0
	for _, ls := range g.logs {
		n += len(ls.waiting) + len(ls.covering)
	}
	return n
}

// Flush starts an fsync of every log with an eager append waiting and no
// fsync running. deliver is called with each finished fsync from the
// goroutine that ran it: it must hand the value to the actor (a Send),
// which then calls Done.
func (g *Group) Flush(deliver func(*Synced)) {
	for i, l := range g.ready {
		g.ready[i] = nil
		ls := g.logs[l]
		if ls == nil { // released meanwhile
			continue
		}
		ls.listed = false
		if ls.job == nil && ls.eager {
			g.start(l, ls, deliver)
		}
	}
	g.ready = g.ready[:0]
}

// FlushLazy is Flush for every log with appends waiting since before
// cutoff, lazy ones included. A younger lazy append is left for a while:
// its id's next transition usually follows within a millisecond, and its
// fsync then covers both (one fsync per slot log instead of two).
func (g *Group) FlushLazy(cutoff time.Time, deliver func(*Synced)) {
	for l, ls := range g.logs {
		if ls.job == nil && len(ls.waiting) > 0 && !ls.since.After(cutoff) {
			g.start(l, ls, deliver)
		}
	}
}

func (g *Group) start(l *Log, ls *logState, deliver func(*Synced)) {
	j := g.begin(l, ls)
	if j == nil {
		return
	}
	j.off = true
	g.started++
	g.running.Add(1)
	go func() {
		defer g.running.Done()
		j.run()
		deliver(&Synced{job: j})
	}()
}

// begin moves ls's waiting appends under a new fsync of l and returns it,
// or answers them and returns nil when there is nothing to fsync.
func (g *Group) begin(l *Log, ls *logState) *syncJob {
	ls.covering, ls.waiting = ls.waiting, ls.covering[:0]
	ls.eager = false
	j := l.prepareSync()
	if j == nil {
		// Offline, or already durable (an inline Sync covered it).
		answer(ls.covering, l.Failed())
		ls.covering = ls.covering[:0]
		return nil
	}
	ls.job, ls.start = j, time.Now()
	return j
}

// flushAlone is Flush for the owner that has nothing else to do: when
// exactly one log has an eager append waiting and no fsync runs, that
// fsync runs inline and its appends are answered before flushAlone
// returns true. Otherwise it does nothing and returns false (use Flush).
//
// Why: off the actor, an fsync costs a goroutine start and a message back
// to the actor (a goroutine wake-up, with the futex calls and context
// switches of an idle thread woken and put back to sleep) before anyone
// is answered. With one write in the owner's mailbox and no other
// fsync to overlap with (one transactional producer), nothing gains from
// the concurrency; a write arriving meanwhile waits this one fsync and
// is then covered by the next.
// The error is the compaction's that may follow (the log is then
// offline).
func (g *Group) flushAlone(synced func(time.Duration, int)) (bool, error) {
	if g.started > 0 {
		return false, nil
	}
	var l *Log
	var ls *logState
	for _, r := range g.ready {
		if s := g.logs[r]; s != nil && s.eager {
			if l != nil {
				return false, nil // two logs: their fsyncs overlap off the owner
			}
			l, ls = r, s
		}
	}
	if l == nil {
		return false, nil
	}
	for i, r := range g.ready {
		g.ready[i] = nil
		if s := g.logs[r]; s != nil {
			s.listed = false
		}
	}
	g.ready = g.ready[:0]
	if j := g.begin(l, ls); j != nil {
		j.run()
		g.finish(l, ls, synced)
	}
	return true, g.compactIfIdle(ls)
}

// FlushIdle is Flush for an owner that knows whether anything else waits
// in its mailbox: when nothing does (idle), a lone fsync runs inline as
// flushAlone says, else every fsync needed starts off the owner. The
// error is flushAlone's compaction's.
func (g *Group) FlushIdle(idle bool, synced func(time.Duration, int), deliver func(*Synced)) error {
	if idle {
		if ok, err := g.flushAlone(synced); ok || err != nil {
			return err
		}
	}
	g.Flush(deliver)
	return nil
}

// Done takes a finished fsync back inside the actor: it answers the
// appends the fsync covered, tells synced (if not nil) how long it took
// and how many it answered, and starts the log's next fsync if eager
// appends arrived meanwhile (they have waited one already). Once the log
// is idle (everything appended durable, no fsync running) and has
// outgrown what its owner holds, it is compacted: only logs just synced
// are looked at. The error is the compaction's (the log is then offline).
// A Synced that Close already took in does nothing.
func (g *Group) Done(s *Synced, synced func(d time.Duration, appends int), deliver func(*Synced)) error {
	l := s.job.l
	ls := g.logs[l]
	if ls == nil || ls.job != s.job {
		return nil
	}
	g.finish(l, ls, synced)
	if ls.eager {
		g.start(l, ls, deliver)
	}
	return g.compactIfIdle(ls)
}

// compactIfIdle compacts ls's log once it is idle (everything appended
// durable, no fsync running) and has outgrown what its owner holds.
func (g *Group) compactIfIdle(ls *logState) error {
	if ls.job == nil && len(ls.waiting) == 0 && ls.owner != nil && ls.owner.NeedsCompaction() {
		return ls.owner.Compact()
	}
	return nil
}

// finish records ls's finished fsync on its log and answers what it
// covered.
func (g *Group) finish(l *Log, ls *logState, synced func(time.Duration, int)) {
	j := ls.job
	ls.job = nil
	if j.off {
		g.started--
	}
	_ = l.finishSync(j)
	// Timed before the answers: they may write to sockets (a share
	// fetch's records), which is not the fsync's time.
	took, n := time.Since(ls.start), len(ls.covering)
	answer(ls.covering, l.Failed())
	ls.covering = ls.covering[:0]
	if synced != nil {
		synced(took, n)
	}
}

// Close waits for the running fsyncs, then fsyncs, inline, every log with
// appends still waiting, and answers everything: for the actor's last
// message (Stopping), after which no Synced is delivered to it. The logs
// may then be closed.
func (g *Group) Close(synced func(time.Duration, int)) {
	g.running.Wait()
	for l := range g.logs {
		g.Release(l, synced)
	}
}

// Release is Close for one log that is about to be closed (a slot handed
// to another broker): it waits for the log's running fsync, fsyncs inline
// what still waits, answers everything and forgets the log. The running
// fsync's Synced still reaches the actor later; Done ignores it.
func (g *Group) Release(l *Log, synced func(time.Duration, int)) {
	ls := g.logs[l]
	if ls == nil {
		return
	}
	if ls.job != nil {
		<-ls.job.done
		g.finish(l, ls, synced)
	}
	if len(ls.waiting) > 0 {
		start := time.Now()
		_ = l.Sync()
		took, n := time.Since(start), len(ls.waiting)
		answer(ls.waiting, l.Failed())
		if synced != nil {
			synced(took, n)
		}
	}
	delete(g.logs, l)
}

func answer(dones []func(error), err error) {
	for _, done := range dones {
		done(err)
	}
}
