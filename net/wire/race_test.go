//go:build race

package wire

// raceEnabled: under the race detector, kmsg's append(a[:0], make(...)...)
// is not fused into one allocation, so decoding allocates each array twice.
const raceEnabled = true
