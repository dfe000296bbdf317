package brokertest

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
)

// Logger captures a broker's log for the test. The lines are printed only
// when the test fails (or always with KAAS_TEST_LOG=1, streamed to
// stderr), so passing runs stay quiet and failing ones explain themselves.
func Logger(t testing.TB) *slog.Logger {
	t.Helper()
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	if os.Getenv("KAAS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	buf := &lockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, opts))
}

// lockedBuffer is an io.Writer safe for the broker's many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var _ io.Writer = (*lockedBuffer)(nil)

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// Bound memory on very chatty tests: keep the last 8 MiB.
	if b.buf.Len() > 16<<20 {
		tail := append([]byte(nil), b.buf.Bytes()[b.buf.Len()-8<<20:]...)
		b.buf.Reset()
		b.buf.WriteString("…(earlier lines dropped)\n")
		b.buf.Write(tail)
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
