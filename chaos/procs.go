package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is a child process — a broker or etcd — that the nemesis kills,
// pauses and starts again on the same command line. Its output goes to
// one log file across every start. (broker/brokertest has its own
// process helper; this package must not import the broker's layer.)
type proc struct {
	name    string
	argv    []string
	logPath string
	ready   *regexp.Regexp // the line that says it serves

	mu      sync.Mutex
	run     *procRun // the current (or last) process
	starts  int
	stopped bool // SIGSTOPped and not yet continued
}

// procRun is one start of a proc.
type procRun struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
	// Valid once done is closed:
	err error
	// ready: it said it serves (a start refused before that is no crash);
	// expected: its exit was caused by the harness (a kill).
	ready, expected atomic.Bool
}

var errExitedEarly = errors.New("exited before it was ready")

// start runs the process once and returns when it logged its ready line
// (or exited, or timeout passed).
func (p *proc) start(timeout time.Duration) error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		log.Close()
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = childAttr()
	p.mu.Lock()
	p.starts++
	fmt.Fprintf(log, "=== chaos: start %d of %s at %s: %q\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano), p.argv)
	err = cmd.Start()
	pw.Close()
	if err != nil {
		p.mu.Unlock()
		pr.Close()
		log.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	run := &procRun{cmd: cmd, done: make(chan struct{})}
	p.run, p.stopped = run, false
	p.mu.Unlock()

	ready := make(chan struct{})
	drained := make(chan struct{}) // the output is all in the log
	var last []string              // the last lines, for an early exit's error
	go func() {
		defer close(drained)
		defer log.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Bytes()
			log.Write(line)
			log.Write([]byte{'\n'})
			if !signalled {
				if last = append(last, string(line)); len(last) > 5 {
					last = last[1:]
				}
			}
			if !signalled && p.ready.Match(line) {
				signalled = true
				run.ready.Store(true)
				close(ready)
			}
		}
		pr.Close()
	}()
	go func() {
		run.err = cmd.Wait()
		close(run.done)
	}()
	select {
	case <-ready:
		return nil
	case <-run.done:
		var output []string
		select {
		case <-drained:
			output = last
		case <-time.After(5 * time.Second): // a child of the child holds the pipe
		}
		return fmt.Errorf("%s %w: %v (last output: %q)", p.name, errExitedEarly, run.err, output)
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not say it was ready within %v", p.name, timeout)
	}
}

// startRetrying starts the process until one start is ready: a broker
// restarted within a TTL of its kill is refused while its old lease
// lives, and says so.
func (p *proc) startRetrying(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := p.start(60 * time.Second)
		if err == nil || !errors.Is(err, errExitedEarly) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (p *proc) current() *procRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

func (p *proc) alive() bool {
	run := p.current()
	if run == nil {
		return false
	}
	select {
	case <-run.done:
		return false
	default:
		return true
	}
}

func (p *proc) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// signal sends sig to the process's group (it runs in a group of its
// own; an `ip netns exec` wrapper execs, so the group is the broker).
func (p *proc) signal(sig syscall.Signal) error {
	run := p.current()
	if run == nil || !p.alive() {
		return fmt.Errorf("%s is not running", p.name)
	}
	p.mu.Lock()
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	p.mu.Unlock()
	return syscall.Kill(-run.cmd.Process.Pid, sig)
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	run := p.current()
	if run == nil {
		return
	}
	run.expected.Store(true)
	_ = syscall.Kill(-run.cmd.Process.Pid, syscall.SIGKILL)
	<-run.done
	p.mu.Lock()
	p.stopped = false
	p.mu.Unlock()
}
