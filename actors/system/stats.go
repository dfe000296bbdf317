package system

// KindStats aggregates the mailbox counters of one kind of actor.
type KindStats struct {
	Actors   int
	Depth    int64 // messages waiting, summed
	MaxDepth int64 // deepest single mailbox
	// Processed includes the messages of stopped actors of the kind, so it
	// only grows (a Prometheus counter).
	Processed int64
}

// KindStats reads every actor's mailbox counters (atomics; no actor is
// asked anything) and sums them by kind.
func (s *System) KindStats() map[string]KindStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]KindStats, len(s.retired)+4)
	for kind, n := range s.retired {
		out[kind] = KindStats{Processed: n}
	}
	for _, i := range s.registry {
		k := out[i.Kind]
		k.Actors++
		d := i.Mailbox.Depth()
		k.Depth += d
		if d > k.MaxDepth {
			k.MaxDepth = d
		}
		k.Processed += i.Mailbox.Processed()
		out[i.Kind] = k
	}
	return out
}

// Wakeups is how many times a mailbox was woken onto a worker goroutine
// so far (every one a hand-off between goroutines), and how many of them
// started a new worker for want of an idle one.
func (s *System) Wakeups() (wakeups, started int64) {
	return s.dispatcher.wakeups.Load(), s.dispatcher.started.Load()
}
