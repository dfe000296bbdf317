package bench

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// sameGCHeadroom sets the garbage collector's percentage so that its next
// goal is the live heap plus headroom bytes (or Go's default, 100, if that
// is more), notes both, and returns what
// restores the percentage before. The consuming scenarios call it once the topic
// is pre-filled, just before measuring.
//
// Why: client and broker share this process's heap, so the broker's live
// heap sets how often the client collects. kfake holds every record in
// its heap (a million pre-filled records: 200–380 MB), so under Go's
// default percentage (100) the client allocated that much between
// collections; kaas keeps records on disk (a live heap of 16–60 MB), so
// the same client collected ten times as often, with write barriers on
// for a good part of each fetch's decoding, and read more slowly (its
// CPU per record 25% above the kfake side's, the broker's own share
// lower than kfake's). The same headroom on both sides makes the
// client's collections equally frequent, whichever broker it runs
// beside; each side's collections still cost what its live heap costs
// to mark.
func (e *Env) sameGCHeadroom(headroom int64) (restore func()) {
	if headroom <= 0 {
		return func() {}
	}
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	live := int64(s[0].Value.Uint64())
	// The goal is the live heap plus GOGC percent of the live heap and
	// the roots (stacks, globals): with a small live heap the roots
	// weigh, and leaving them out gave kaas's side (13 MB live) 0.9 GB of
	// headroom instead of 512 MiB.
	scannable := max(live+int64(s[1].Value.Uint64())+int64(s[2].Value.Uint64()), 1)
	// Never below Go's default: a side whose live heap exceeds the
	// headroom keeps the headroom it would have had (only the other side
	// can lose by that).
	pct := int(max(100, headroom*100/scannable))
	prev := debug.SetGCPercent(pct)
	metrics.Read(s)
	goal := int64(s[3].Value.Uint64())
	e.Note("garbage collector: live heap %.0f MB when measuring began, GOGC %d: the next collection at %.0f MB, %d MiB above it (--gc-headroom-mib %d, the same on both sides unless Go's default gives more)",
		float64(live)/1e6, pct, float64(goal)/1e6, (goal-live)>>20, headroom>>20)
	return func() { debug.SetGCPercent(prev) }
}
