package broker_test

// Committed offsets survive a SIGKILL of a `kaas serve` process. The
// subprocess helpers here are minimal stand-ins: the shared ones
// (broker/brokertest, from the core tests work) were not on main yet.

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// buildKaas builds the kaas command into a temporary directory.
func buildKaas(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kaas")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/kaas")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kaas: %v\n%s", err, out)
	}
	return bin
}

// kaasProcess is a running `kaas serve`.
type kaasProcess struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
}

var listening = regexp.MustCompile(`listening on ([0-9.]+:[0-9]+)`)

// serveKaas starts `kaas serve` on 127.0.0.1:0 over dataDir and waits for
// its listen address, with extra flags. It is killed when the test ends.
func serveKaas(t *testing.T, bin, dataDir string, extra ...string) *kaasProcess {
	t.Helper()
	p := &kaasProcess{done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data", dataDir, "--admin", "",
		"--group-initial-rebalance-delay", "50ms"}, extra...)...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addrc := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("kaas serve log:\n%s", p.log.String())
			p.mu.Unlock()
		}
	})
	select {
	case p.addr = <-addrc:
	case <-p.done:
		t.Fatalf("kaas serve exited before listening:\n%s", p.log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("kaas serve did not start listening within 30s")
	}
	return p
}

// kill sends SIGKILL and waits until the process is gone.
func (p *kaasProcess) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// TestCommitsSurviveSIGKILL commits ever larger offsets as fast as the
// broker acknowledges them, SIGKILLs it mid-stream, restarts it on the same
// data directory and checks the committed offset is at least the last one
// acknowledged (nothing acknowledged is lost) and no more than the last one
// sent.
func TestCommitsSurviveSIGKILL(t *testing.T) {
	bin := buildKaas(t)
	for _, m := range killModes {
		t.Run(m.name, func(t *testing.T) { commitsSurviveSIGKILL(t, bin, m.flags) })
	}
}

// killModes are the durability modes the SIGKILL tests run in: fsync
// before every acknowledgement (the default), and --flush-interval-ms,
// whose acknowledgements wait for the page cache only — which a SIGKILL
// leaves whole, so nothing acknowledged may be missing either way.
var killModes = []struct {
	name  string
	flags []string
}{
	{"fsync", nil},
	{"flush-interval", []string{"--flush-interval-ms", "5"}},
}

func commitsSurviveSIGKILL(t *testing.T, bin string, flags []string) {
	dir := t.TempDir()
	p := serveKaas(t, bin, dir, flags...)

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "kill"); err != nil {
		t.Fatal(err)
	}

	var acked, sent atomic.Int64
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := int64(1); ; i++ {
			sent.Store(i)
			offs := kadm.Offsets{}
			offs.Add(kadm.Offset{Topic: "kill", Partition: 0, At: i, LeaderEpoch: -1})
			offs.Add(kadm.Offset{Topic: "kill", Partition: 1, At: 2 * i, LeaderEpoch: -1})
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := adm.CommitOffsets(cctx, "survivor", offs)
			ccancel()
			if err != nil || resp.Error() != nil {
				return
			}
			acked.Store(i)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for acked.Load() < 200 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if acked.Load() < 200 {
		t.Fatalf("only %d commits acknowledged in 20s", acked.Load())
	}
	p.kill()
	<-stopped
	cl.Close()
	lastAcked, lastSent := acked.Load(), sent.Load()

	p = serveKaas(t, bin, dir, flags...)
	cl, err = kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	o0, _ := offs.Lookup("kill", 0)
	o1, _ := offs.Lookup("kill", 1)
	t.Logf("acknowledged up to %d, sent up to %d, recovered %d/%d", lastAcked, lastSent, o0.At, o1.At)
	if o0.At < lastAcked || o0.At > lastSent {
		t.Fatalf("recovered offset %d outside [last acknowledged %d, last sent %d]", o0.At, lastAcked, lastSent)
	}
	if o1.At != 2*o0.At {
		t.Fatalf("the two partitions of one commit disagree: %d and %d (a commit is atomic)", o0.At, o1.At)
	}
	if _, err := os.Stat(filepath.Join(dir, "__cluster", "offsets")); err != nil {
		t.Fatalf("offsets directory: %v", err)
	}
}
