package bench

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// sameGCHeadroom keeps the garbage collector's goal headroom bytes above
// the live heap it found at its last collection, from now until restore
// is called, notes it, and returns restore. Every scenario's measured
// window runs under it (Begin to EndMeasuring).
//
// Why: client and broker share this process's heap, so the broker's live
// heap sets how often the client collects. kfake holds every record in
// its heap, kaas keeps records on disk. Under Go's default percentage
// (GOGC 100, a goal twice the live heap) the client beside kfake
// allocated hundreds of MB between collections and beside kaas a few
// tens: in produce, the collector's mark workers took 17% of the
// process's CPU beside kaas and 1.7% beside kfake, for the same client
// doing the same work; in consume, the same client read 25% slower beside
// kaas. The same headroom on both sides makes the client's collections
// equally frequent, whichever broker it runs beside; each side's
// collections still cost what its live heap costs to mark.
//
// Why re-set after every collection, not one percentage or a memory
// limit: one percentage set from kaas's 10 MB at the start (GOGC ~5000)
// scaled the headroom with every later live heap, and once the consuming
// client held a few fetches (300 MB) the goal was 2.3 GB: two collections
// in 5 s, every allocation on a fresh page, the client's decoding 60%
// slower than beside kfake. A memory limit fixed at the start would choke
// kfake in produce, whose live heap grows by every record it is sent.
func (e *Env) sameGCHeadroom(headroom int64) (restore func()) {
	if headroom <= 0 {
		return func() {}
	}
	runtime.GC()
	t := &gcTuner{headroom: headroom}
	live, prev := t.tune()
	t.arm()
	cycles0 := gcCycles()
	e.Note("garbage collector: live heap %.0f MB when measuring began; each collection's goal is the live heap it found plus %d MiB (--gc-headroom-mib, the same on both sides)",
		float64(live)/1e6, headroom>>20)
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(prev)
		e.Note("garbage collector: %d collections in the measured window", gcCycles()-cycles0)
	}
}

// gcTuner sets the collector's percentage after each collection so that
// the next goal is the live heap plus headroom. A finalizer on a sentinel
// object is how it learns that a collection ended: the runtime has no
// other hook.
type gcTuner struct {
	headroom int64
	stopped  atomic.Bool
}

type gcSentinel struct{ t *gcTuner }

func (t *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{t: t}, func(s *gcSentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.tune()
		s.t.arm()
	})
}

// tune sets the percentage from the last collection's live heap and
// returns that heap and the percentage it replaced. The goal is the live heap plus GOGC percent of the
// live heap and the roots (stacks, globals): with a small live heap the
// roots weigh, and leaving them out gave kaas's side (13 MB live) 0.9 GB
// of headroom instead of 512 MiB.
func (t *gcTuner) tune() (live int64, prev int) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	live = int64(s[0].Value.Uint64())
	scannable := max(live+int64(s[1].Value.Uint64())+int64(s[2].Value.Uint64()), 1)
	return live, debug.SetGCPercent(int(max(1, t.headroom*100/scannable)))
}

func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
