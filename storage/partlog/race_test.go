//go:build race

package partlog

// raceEnabled: the race detector is on (instrumented codecs are tens of
// times slower; the allocation checks skip their large inputs).
const raceEnabled = true
