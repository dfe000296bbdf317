package partlog

import (
	"math/bits"
	gosync "sync" // the package's tests have a sync helper
)

// Buf is a read buffer from a pool (View.ReadPooled). Release gives it
// back once nothing refers to its bytes any more: for a Fetch answer,
// once the connection has written them or copied them away.
//
// Why: a consumer's fetches read as many bytes as they answer, and with
// a fresh buffer for each the broker's allocation rate drove the garbage
// collector; its marking phases (write barriers on, in the broker and in
// every other goroutine of the process) were a quarter of the CPU of
// consuming a pre-filled topic (`kaas bench consume`).
type Buf struct {
	b     []byte
	class int // pool class; -1: not pooled (larger than the largest class)
}

const (
	minPooledShift = 14 // 16 KiB, the smallest class
	maxPooledShift = 22 // 4 MiB, the largest
)

var bufPools [maxPooledShift - minPooledShift + 1]gosync.Pool

// getBuf returns an empty buffer of capacity at least n.
func getBuf(n int) *Buf {
	c := 0
	if n > 1<<minPooledShift {
		c = bits.Len(uint(n-1)) - minPooledShift
	}
	if c >= len(bufPools) {
		return &Buf{b: make([]byte, 0, n), class: -1}
	}
	if b, ok := bufPools[c].Get().(*Buf); ok {
		b.b = b.b[:0]
		return b
	}
	return &Buf{b: make([]byte, 0, 1<<(c+minPooledShift)), class: c}
}

// Release returns the buffer to its pool; nil does nothing. Nothing may
// read the bytes it held afterwards.
func (b *Buf) Release() {
	if b != nil && b.class >= 0 {
		bufPools[b.class].Put(b)
	}
}
