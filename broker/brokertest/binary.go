package brokertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
)

// Binary builds the kaas command once per test process (go build -o
// <tmp>/kaas kaas/cmd/kaas, with the race detector off so subprocess
// tests stay fast) and returns its path. Main removes it at the end.
// make test builds it once for every package and names it in
// KAAS_TEST_BINARY, which is then used as it is.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KAAS_TEST_BINARY"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "kaas-bin-")
		if buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "kaas")
		cmd := exec.Command("go", "build", "-o", buildPath, "kaas/cmd/kaas")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build kaas/cmd/kaas: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

func cleanupBinaries() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Process is a `kaas serve` subprocess.
type Process struct {
	// Addr is the address from the "listening on ADDR" log line.
	Addr    string
	DataDir string

	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan struct{}
	err  error // Wait's result, valid once done is closed
}

var listeningLine = regexp.MustCompile(`msg="listening on ([^"\s]+)"`)

// Serve starts `kaas serve --listen 127.0.0.1:0 --data dataDir --admin ""
// --internal-topic-configs` plus extra flags, and returns once it has
// logged "listening on ADDR".
// The process is killed when the test ends if it is still running; its
// log is printed if the test failed.
func Serve(t testing.TB, dataDir string, extra ...string) *Process {
	t.Helper()
	return serve(t, dataDir, exec.Command(Binary(t), serveArgs(dataDir, extra)...))
}

// ServeInShell is Serve with the process started by bash after the shell
// commands in setup, e.g. "ulimit -f 64" to make writes past 64 KiB fail
// with EFBIG — a real disk error in a real process, without root.
func ServeInShell(t testing.TB, dataDir, setup string, extra ...string) *Process {
	t.Helper()
	args := append([]string{"-c", setup + ` && exec "$0" "$@"`, Binary(t)}, serveArgs(dataDir, extra)...)
	return serve(t, dataDir, exec.Command("bash", args...))
}

// ServeUnder is Serve with the process started under a wrapper command
// that runs it as a child, e.g. strace injecting EIO into fdatasync
// ("strace", "-f", "-I4", "-e", "inject=fdatasync:error=EIO:when=2..4"):
// real disk errors in a real process. The wrapper and the broker get a
// process group of their own, which Signal and Kill address, so the broker
// never outlives its wrapper; the wrapper must block catchable signals
// (strace -I4) and exit with the broker's status (strace does).
func ServeUnder(t testing.TB, dataDir string, wrapper []string, extra ...string) *Process {
	t.Helper()
	args := append(append(append([]string(nil), wrapper[1:]...), Binary(t)), serveArgs(dataDir, extra)...)
	cmd := exec.Command(wrapper[0], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return serve(t, dataDir, cmd)
}

// ServeExpectingFailure runs `kaas serve` on dataDir expecting it to exit
// without ever listening (a refused start) within d, and returns its log
// and exit code; the test fails if it starts listening or runs on.
func ServeExpectingFailure(t testing.TB, dataDir string, d time.Duration, extra ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, Binary(t), serveArgs(dataDir, extra)...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("kaas serve did not exit within %v:\n%s", d, out)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running kaas serve: %v", err)
	}
	if listeningLine.Match(out) {
		t.Fatalf("kaas serve started listening:\n%s", out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func serveArgs(dataDir string, extra []string) []string {
	return append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dataDir, "--admin", "", "--internal-topic-configs"}, extra...)
}

func serve(t testing.TB, dataDir string, cmd *exec.Cmd) *Process {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{DataDir: dataDir, cmd: cmd, log: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kaas serve: %v", err)
	}
	addr := make(chan string, 1)
	go func() {
		// Copy every line to the log; report the first listening line.
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.log, line)
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("kaas serve log (%s):\n%s", dataDir, p.log.String())
		}
	})
	select {
	case p.Addr = <-addr:
		return p
	case <-p.done:
		t.Fatalf("kaas serve exited before listening: %v\n%s", p.err, p.log.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("kaas serve did not log \"listening on\" within 60s\n%s", p.log.String())
	}
	return nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Log is everything the process printed so far.
func (p *Process) Log() string { return p.log.String() }

// Signal sends sig to the process (to its process group if it runs
// under a wrapper).
func (p *Process) Signal(sig os.Signal) error {
	if p.group() {
		return syscall.Kill(-p.cmd.Process.Pid, sig.(syscall.Signal))
	}
	return p.cmd.Process.Signal(sig)
}

func (p *Process) group() bool { return p.cmd.SysProcAttr != nil && p.cmd.SysProcAttr.Setpgid }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Wait waits up to d for the process to exit and returns its exit code
// (-1 if it was killed by a signal).
func (p *Process) Wait(d time.Duration) (int, error) {
	select {
	case <-p.done:
	case <-time.After(d):
		return 0, fmt.Errorf("kaas serve still running after %v", d)
	}
	return p.cmd.ProcessState.ExitCode(), nil
}

// Accepts reports whether a TCP connection to addr succeeds now.
func Accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Run runs the kaas binary with args and returns its combined output and
// exit code.
func Run(t testing.TB, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running kaas %v: %v", args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}
