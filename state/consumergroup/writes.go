package consumergroup

import "kaas/storage/offsetlog"

// writeTracker numbers the group's log appends, so that an answer which
// wrote nothing itself is still sent only once every append issued before
// it is durable: a heartbeat that reads an assignment another member's
// heartbeat has just computed must not hand it out before the records
// saying so are on disk (Apache completes such reads once the log's high
// watermark passes its last write). Appends may complete out of order (a
// failed slot answers at once); a barrier waits for every earlier one.
type writeTracker struct {
	issued   uint64
	pending  map[uint64]bool
	barriers []barrier
}

type barrier struct {
	after uint64 // run once no append numbered <= after is pending
	fn    func()
}

// persist appends e through the Env and tracks it.
func (g *Group) persist(e offsetlog.Entry, done func(code int16, firstSeq uint64)) {
	w := &g.writes
	w.issued++
	n := w.issued
	if w.pending == nil {
		w.pending = map[uint64]bool{}
	}
	w.pending[n] = true
	g.env.Persist(e, func(code int16, firstSeq uint64) {
		delete(w.pending, n)
		done(code, firstSeq)
		g.runBarriers()
	})
}

// afterWrites runs fn once every append issued so far is complete (at
// once if none is pending).
func (g *Group) afterWrites(fn func()) {
	w := &g.writes
	if len(w.pending) == 0 {
		fn()
		return
	}
	w.barriers = append(w.barriers, barrier{after: w.issued, fn: fn})
}

func (g *Group) runBarriers() {
	w := &g.writes
	oldest := w.issued + 1
	for n := range w.pending {
		oldest = min(oldest, n)
	}
	i := 0
	for ; i < len(w.barriers) && w.barriers[i].after < oldest; i++ {
	}
	ready := w.barriers[:i]
	w.barriers = w.barriers[i:]
	for _, b := range ready {
		b.fn()
	}
}

// persistRecords appends records as one plain entry (atomic, like a
// Kafka batch) and calls done with the group request's code once it is
// durable; with no records, once every earlier append is.
func (g *Group) persistRecords(recs []offsetlog.Record, done func(code int16)) {
	if len(recs) == 0 {
		g.afterWrites(func() { done(0) })
		return
	}
	g.persist(offsetlog.Entry{Kind: offsetlog.KindPlain, Records: recs}, func(code int16, _ uint64) {
		if code != 0 {
			g.log.Warn("consumer group records failed to reach the log", "code", code, "records", len(recs))
		}
		done(mapStoreError(code))
	})
}
