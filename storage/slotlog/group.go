package slotlog

// Group is group commit over several logs, for the one actor that owns
// them: each append registers what to do once it is durable, and Flush
// fsyncs every log written since the last flush once, then answers every
// waiting append with its own log's outcome (nil, or the failure that took
// that log offline). Appends that arrive while a flush runs wait in the
// actor's mailbox and are covered by the next one.
type Group struct {
	dirty   map[*Log]struct{}
	waiting []waiter
}

type waiter struct {
	log  *Log
	done func(error)
}

// Wait registers done for an append to l that succeeded.
func (g *Group) Wait(l *Log, done func(error)) {
	if g.dirty == nil {
		g.dirty = map[*Log]struct{}{}
	}
	g.dirty[l] = struct{}{}
	g.waiting = append(g.waiting, waiter{l, done})
}

// Pending is how many appends wait for the next Flush.
func (g *Group) Pending() int { return len(g.waiting) }

// Flush fsyncs the dirty logs, answers the waiting appends and returns the
// logs it synced (the caller may compact them now: everything appended to
// them is durable).
func (g *Group) Flush() []*Log {
	synced := make([]*Log, 0, len(g.dirty))
	for l := range g.dirty {
		if l.Sync() == nil {
			synced = append(synced, l)
		}
	}
	for _, w := range g.waiting {
		w.done(w.log.Failed())
	}
	clear(g.dirty)
	g.waiting = g.waiting[:0]
	return synced
}
