package partition

import (
	"time"

	"kaas/storage/partlog"
)

// syncRun is one group-commit fsync running off the actor (flushSoon);
// the actor gets it back as a message once done is closed.
type syncRun struct {
	job  *partlog.SyncJob
	err  error
	done chan struct{}
}

// flushSoon is the group commit with fsync on: the fsync runs on a
// goroutine of its own while the actor goes on validating and writing
// the batches that arrive meanwhile (into the page cache, not yet
// acknowledged), so a producer with several requests in flight has its
// next batch written when the fsync before it ends, and one fsync at a
// time covers everything appended while the previous one ran. No answer
// goes before its fsync: the actor takes the finished job in (synced)
// and answers from there, jobs in the order they were prepared.
//
// It was inline, to keep the acknowledgement to one goroutine hop; this
// costs a hop more (fsync goroutine -> actor) and won: `kaas bench
// --sides kaas --duration 3s produce produce-idempotent`, main and this
// in turn, 3 pairs at load average 1.3-2.4: produce 1.93/2.02/2.15 ->
// 2.04/2.18/2.16 M records/s, produce-idempotent 1.61/1.69/1.87 ->
// 1.87/1.78/2.09 M (every pair ahead); against kfake in the same runs at
// load 5-8 the ratios stayed inside their spread (produce medians 0.87
// -> 0.85x, produce-idempotent 0.86 -> 0.93x over 6 pairs).
func (p *Partition) flushSoon() {
	if p.cfg.FlushInterval > 0 {
		p.flush()
		return
	}
	if p.syncing != nil {
		p.syncAgain = true
		return
	}
	job := p.log.PrepareSync()
	if job == nil {
		return
	}
	n := p.appends
	p.appends = 0
	r := &syncRun{job: job, done: make(chan struct{})}
	p.syncing = r
	self, sys, obs := p.self, p.sys, p.cfg.Observer
	go func() {
		start := time.Now()
		r.err = job.Run()
		obs.Synced(time.Since(start), n)
		close(r.done)
		sys.Send(self, r)
	}()
}

// syncFinished takes a finished fsync in: r's data becomes visible and
// its acknowledgements go, in the order the jobs were prepared (one runs
// at a time). again starts the next one if appends came meanwhile.
func (p *Partition) syncFinished(r *syncRun, again bool) {
	if p.syncing != r {
		return // already taken in by awaitSync
	}
	<-r.done
	p.syncing = nil
	p.synced(r.job, r.err)
	if again && p.syncAgain {
		p.syncAgain = false
		p.flushSoon()
	}
}

// awaitSync waits for the fsync running off the actor, if any, and takes
// it in: whatever fsyncs inline next (flush, close) comes after it, and no
// file it holds is removed or replaced (retention, cleaning) while it
// runs. Appends it did not cover get a flush queued, as afterWrite does.
func (p *Partition) awaitSync() {
	if r := p.syncing; r != nil {
		p.syncFinished(r, false)
		if p.syncAgain {
			p.syncAgain = false
			p.queueFlush()
		}
	}
}
