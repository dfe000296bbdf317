package bench

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// sameGCHeadroom makes the garbage collector run whenever the process's Go
// memory has grown headroom bytes past what it held just after a
// collection at the start of measuring, whichever broker runs beside the
// client, notes it, and returns what restores the collector's settings.
// The consuming scenarios call it once the topic is pre-filled, just
// before measuring.
//
// Why: client and broker share this process's heap, so the broker's live
// heap sets how often the client collects. kfake holds every record in
// its heap (a million pre-filled records: 150–380 MB), so under Go's
// default percentage (100) the client allocated that much between
// collections; kaas keeps records on disk (a live heap of 10–60 MB), so
// the same client collected ten times as often and read more slowly.
//
// Why a memory limit with the percentage off, not a larger percentage:
// a percentage scales the headroom with whatever the live heap is at each
// collection. Set from kaas's 10 MB at the start (GOGC ~5000), it let the
// heap grow to 2.3 GB once the client held a few fetches (300 MB live):
// two collections in 5 s, every allocation on a fresh page, and the
// client's record decoding 60% slower than beside kfake (0.56× over 1,000
// partitions). A limit is the same number of bytes above the start on
// both sides, and the client's own buffers use the same share of it.
func (e *Env) sameGCHeadroom(headroom int64) (restore func()) {
	if headroom <= 0 {
		return func() {}
	}
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(s)
	live := int64(s[0].Value.Uint64())
	// What the limit counts is everything the runtime has mapped and not
	// returned to the OS; free heap it still holds is left out, or a side
	// whose pre-filling left more of it (kfake: 550 MB) would start with
	// that much more room to allocate.
	held := int64(s[1].Value.Uint64() - s[2].Value.Uint64() - s[3].Value.Uint64())
	prevPct := debug.SetGCPercent(-1)
	prevLimit := debug.SetMemoryLimit(held + headroom)
	e.Note("garbage collector: live heap %.0f MB when measuring began, Go memory %.0f MB; collections when it reaches %.0f MB (GOGC off, memory limit %d MiB above the start: --gc-headroom-mib, the same on both sides)",
		float64(live)/1e6, float64(held)/1e6, float64(held+headroom)/1e6, headroom>>20)
	return func() {
		debug.SetMemoryLimit(prevLimit)
		debug.SetGCPercent(prevPct)
	}
}
