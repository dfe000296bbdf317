package brokertest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"kaas/storage/diskcheck"
)

// Main runs a package's tests and then fails the run if goroutines started
// by the tests are still alive — every broker and client a test starts must
// be stopped — or if a request handler waited on the disk on a network
// event loop (storage/diskcheck). Use it as the package's TestMain:
//
//	func TestMain(m *testing.M) { brokertest.Main(m) }
func Main(m *testing.M) {
	diskcheck.Enable()
	code := m.Run()
	if v := diskcheck.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "request handlers waited on the disk on a network event loop (mark their API blocking):\n\n%s\n", strings.Join(v, "\n\n"))
		code = 1
	}
	if code == 0 {
		if leaked := waitForLeaks(10 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines still running after the tests (a broker or client was not stopped?):\n\n%s\n", leaked)
			code = 1
		}
	}
	cleanupBinaries()
	os.Exit(code)
}

// waitForLeaks polls until only expected goroutines remain, and returns
// the stacks of the unexpected ones if they do not go away within d.
func waitForLeaks(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		leaked := unexpectedGoroutines()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processWide are goroutines started once per process by libraries (not
// per broker), and the test framework's own.
var processWide = []string{
	"testing.(*M).",
	"testing.runTests",
	"testing.tRunner",
	"brokertest.unexpectedGoroutines",
	"github.com/panjf2000/ants/v2.(*poolCommon)", // gnet's shared worker pool
	"github.com/panjf2000/ants/v2.(*goWorker)",   // its idle workers (they register accepted connections)
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.goexit0",
}

func unexpectedGoroutines() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if g == "" || isProcessWide(g) {
			continue
		}
		out = append(out, g)
	}
	return strings.Join(out, "\n\n")
}

func isProcessWide(stack string) bool {
	if strings.Contains(stack, "main.main()") && strings.Contains(stack, "testing.(*M).Run") {
		return true
	}
	for _, s := range processWide {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}
