package broker

import "sync/atomic"

// gather answers a call once every actor it fanned out to has replied.
// It starts with one count held by the fanning-out loop itself, so the
// answer cannot leave before the last part has been dispatched: the loop
// calls add before each dispatch and done once at its end; each reply
// calls done.
type gather struct {
	pending atomic.Int64
	answer  func()
}

func newGather(answer func()) *gather {
	g := &gather{answer: answer}
	g.pending.Store(1)
	return g
}

func (g *gather) add() { g.pending.Add(1) }

func (g *gather) done() {
	if g.pending.Add(-1) == 0 {
		g.answer()
	}
}
