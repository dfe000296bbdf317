package broker

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Opening partitions in bulk (recovery at start-up, a CreateTopics or
// CreatePartitions of thousands, a peer's share claimed in a cluster)
// allocates far more than it keeps: directory listings, index and
// snapshot reads, file names, the requests and answers. The garbage
// collector frees it, but the runtime keeps freed pages up to about the
// next heap goal (twice the live heap with GOGC 100) for the next burst,
// and an idle broker never has one: a broker with 10,000 idle partitions
// held some 15 MiB it had no use for. So once the opens have been quiet
// for heapReleaseQuiet, the freed heap is handed back to the OS, as a JVM
// does with G1PeriodicGCInterval (JEP 346). It costs one full collection
// (a few milliseconds of CPU per 10 MiB of live heap) per burst, at most
// once per heapReleaseSpacing however often topics are created; nothing
// is waited for (the collection runs on a timer goroutine, concurrently
// with the broker's work). GOGC and GOMEMLIMIT are left to the operator.
//
// A broker that is serving meanwhile has a use for the freed heap: a
// producer at full rate right after its CreateTopics allocates a request
// frame per Produce, and the forced collection, with every free page
// handed back and faulted in again by the next frames, cost it about 50
// ms of CPU inside `kaas bench produce`'s 3 s window. So the release waits
// while the process allocated more than heapReleaseBusy in the last
// heapReleaseQuiet, and runs once it allocates less (an idle broker's
// next second).
const (
	heapReleaseQuiet   = time.Second
	heapReleaseSpacing = time.Minute
	heapReleaseBusy    = 32 << 20
)

// heapRelease schedules the release after partitions are opened.
type heapRelease struct {
	mu      sync.Mutex
	timer   *time.Timer
	last    time.Time // the last release started
	stopped bool
	// allocs is the process's allocated bytes when the timer was last
	// armed; allocated reads them (heapAllocated; a fake in tests).
	allocs    uint64
	allocated func() uint64
	// done counts the releases made (tests).
	done atomic.Int64
}

// heapAllocated is the bytes the process has allocated on the heap since
// it started (the Go runtime's cumulative count).
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// arm (re)starts the timer to fire after wait (caller holds mu).
func (r *heapRelease) arm(wait time.Duration) {
	if r.allocated == nil {
		r.allocated = heapAllocated
	}
	r.allocs = r.allocated()
	if r.timer == nil {
		r.timer = time.AfterFunc(wait, r.release)
	} else {
		r.timer.Reset(wait)
	}
}

// opened notes that partitions were just opened: the release runs once no
// more have been for heapReleaseQuiet (and heapReleaseSpacing after the
// previous one).
func (r *heapRelease) opened() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.arm(r.delay(time.Now()))
}

// delay is how long after now a release may run (caller holds mu).
func (r *heapRelease) delay(now time.Time) time.Duration {
	return max(heapReleaseQuiet, r.last.Add(heapReleaseSpacing).Sub(now))
}

func (r *heapRelease) release() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	if r.allocated()-r.allocs > heapReleaseBusy {
		r.arm(heapReleaseQuiet) // serving: the freed heap is in use
		r.mu.Unlock()
		return
	}
	r.last = time.Now()
	r.mu.Unlock()
	debug.FreeOSMemory()
	r.done.Add(1)
}

// stop cancels a pending release (the broker is closing: its partitions
// are about to go, and a collection would only slow the shutdown).
func (r *heapRelease) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
}
