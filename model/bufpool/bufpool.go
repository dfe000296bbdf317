// Package bufpool is the process's pool of large byte buffers, in
// power-of-two size classes, for bytes whose owner knows when nothing
// refers to them any more: a Fetch answer's record sets (storage/partlog's
// pooled reads) and a Produce request's frame (net/server). A buffer never
// released is left to the garbage collector, and the pools are emptied by
// it too, so a path that cannot tell when its bytes are dead simply does
// not release them.
//
// Why: a producer or a consumer at full rate moves as many bytes through
// the broker as it sends or reads, and with a fresh buffer for each the
// allocation rate drove the garbage collector: its marking (write barriers
// on in every goroutine) and sweeping were a quarter of the CPU of
// consuming a pre-filled topic (`kaas bench consume`), and about a third
// of a standalone broker's CPU under one producer (`kaas serve`).
package bufpool

import (
	"math/bits"
	"sync"
)

// Buf is a buffer from the pool.
type Buf struct {
	b     []byte
	class int // pool class; -1: not pooled (larger than the largest class)
}

const (
	minShift = 14 // 16 KiB, the smallest class
	maxShift = 22 // 4 MiB, the largest
)

var pools [maxShift - minShift + 1]sync.Pool

// Get returns an empty buffer of capacity at least n.
func Get(n int) *Buf {
	c := 0
	if n > 1<<minShift {
		c = bits.Len(uint(n-1)) - minShift
	}
	if c >= len(pools) {
		return &Buf{b: make([]byte, 0, n), class: -1}
	}
	if b, ok := pools[c].Get().(*Buf); ok {
		b.b = b.b[:0]
		return b
	}
	return &Buf{b: make([]byte, 0, 1<<(c+minShift)), class: c}
}

// Bytes is the buffer, empty, with its whole capacity.
func (b *Buf) Bytes() []byte { return b.b[:0] }

// Release returns the buffer to its pool; nil does nothing. Nothing may
// read or write the bytes it held afterwards.
func (b *Buf) Release() {
	if b != nil && b.class >= 0 {
		pools[b.class].Put(b)
	}
}
