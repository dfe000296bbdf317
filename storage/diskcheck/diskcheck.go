// Package diskcheck enforces, in tests, that a network event loop never
// waits on the disk: the broker marks the goroutine of an event loop while
// it runs a request's handler (OnLoop), and storage calls Blocking before
// every filesystem operation (the real filesystem in storage/vfs) and
// before taking a lock that is held across one. A call from a marked
// goroutine is recorded with its stack, and brokertest.Main fails the run
// on any. Off (the default) it costs one atomic load per call.
package diskcheck

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

var (
	enabled    atomic.Bool
	loops      sync.Map // goroutine id → struct{}
	mu         sync.Mutex
	violations []string
)

// Enable turns the check on.
func Enable() { enabled.Store(true) }

// Violations returns what was recorded so far and forgets it.
func Violations() []string {
	mu.Lock()
	defer mu.Unlock()
	v := violations
	violations = nil
	return v
}

func noop() {}

// OnLoop marks the calling goroutine as an event loop running a handler,
// until the returned function is called.
func OnLoop() (done func()) {
	if !enabled.Load() {
		return noop
	}
	id := goid()
	loops.Store(id, struct{}{})
	return func() { loops.Delete(id) }
}

// Blocking is called before blocking disk I/O, or before taking a lock
// held across it: op on the file (or what) named path. Both are constants
// or already at hand, so a call costs nothing but the enabled check.
func Blocking(op, path string) {
	if !enabled.Load() {
		return
	}
	if _, onLoop := loops.Load(goid()); !onLoop {
		return
	}
	buf := make([]byte, 16<<10)
	buf = buf[:runtime.Stack(buf, false)]
	mu.Lock()
	violations = append(violations, fmt.Sprintf("an event loop waits on the disk (%s %s):\n%s", op, path, buf))
	mu.Unlock()
}

// goid is the calling goroutine's id, read from its stack header
// ("goroutine 123 [running]:").
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
