package partlog

import "kaas/model/bufpool"

// Buf is a read buffer from the process's buffer pool (View.ReadPooled).
// Release gives it back once nothing refers to its bytes any more: for a
// Fetch answer, once the connection has written them or copied them away.
type Buf = bufpool.Buf

// getBuf returns an empty buffer of capacity at least n.
func getBuf(n int) *Buf { return bufpool.Get(n) }
