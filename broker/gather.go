package broker

import "sync/atomic"

// gather answers once every actor a call fanned out to has replied — the
// one way handlers (and the coordinators' fan-outs) wait for N replies.
// It starts with one count held by the fanning-out loop itself, so the
// answer cannot leave before the last part has been dispatched: the loop
// calls add before each dispatch and done once at its end; each reply
// calls done, or fail with its error code. The answer runs on the
// goroutine of the last reply (no goroutine waits) and gets the first
// error code reported, 0 if none.
type gather struct {
	pending atomic.Int64
	first   atomic.Int32 // first non-zero code; 0 until one is reported
	answer  func(firstErr int16)
}

// newGather gathers replies whose errors travel in the response itself.
func newGather(answer func()) *gather {
	return gatherFirstError(func(int16) { answer() })
}

// gatherFirstError gathers replies that each report an error code.
func gatherFirstError(answer func(firstErr int16)) *gather {
	g := &gather{answer: answer}
	g.pending.Store(1)
	return g
}

func (g *gather) add() { g.pending.Add(1) }

func (g *gather) done() { g.fail(0) }

// fail is done for a reply with an error code (0: none).
func (g *gather) fail(code int16) {
	if code != 0 {
		g.first.CompareAndSwap(0, int32(code))
	}
	if g.pending.Add(-1) == 0 {
		g.answer(int16(g.first.Load()))
	}
}
