package server

import "time"

// logEvery lets a recurring log line through once and then at most once
// per interval, counting the occurrences it holds back so the next line
// can say how many there were. A broker out of file descriptors fails an
// accept every second or faster for as long as the shortage lasts; one
// line per failure buried everything else in the log. The metric still
// counts every failure. Not safe for concurrent use: each accept loop
// has its own.
type logEvery struct {
	interval time.Duration
	next     time.Time // no line before this
	held     int       // occurrences not logged since the last line
}

// allow records one occurrence at now. It reports whether to log it and,
// if so, how many occurrences since the previous line were not logged.
func (l *logEvery) allow(now time.Time) (ok bool, held int) {
	if now.Before(l.next) {
		l.held++
		return false, 0
	}
	held, l.held = l.held, 0
	l.next = now.Add(l.interval)
	return true, held
}
