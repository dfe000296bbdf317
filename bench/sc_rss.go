package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&Scenario{
		Name: "rss",
		About: "resident memory of a broker process with --fence-partitions idle partitions " +
			"(each broker runs as a child process; measured after the partitions are created and it has idled)",
		Headline: "MiB", Latency: "-",
		NoTarget: true,
		Sides:    []string{"kaas", "kfake"},
		Params: func(o *Options) string {
			return fmt.Sprintf("%d partitions, idle for min(--duration, 5s)", o.FencePartitions)
		},
		Run: idleRSS,
	})
}

// rssTopicPartitions is the most partitions the rss scenario puts in one
// topic.
const rssTopicPartitions = 10_000

func idleRSS(ctx context.Context, e *Env) error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("rss reads /proc: linux only")
	}
	cmd, stdin, stdout, err := startChild(childEnv + "=" + e.Side)
	if err != nil {
		return fmt.Errorf("starting the %s child: %w", e.Side, err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ADDR ")
	if err != nil || !ok {
		return fmt.Errorf("the %s child did not report its address (%q): %v", e.Side, line, err)
	}
	e.Target = &Target{Side: e.Side, Addrs: []string{addr}}
	pid := cmd.Process.Pid
	base, err := rssMiB(pid)
	if err != nil {
		return err
	}
	e.Begin()
	// Topics of at most rssTopicPartitions each: 100,000 partitions in
	// one CreateTopics (and one Metadata answer) measures the request,
	// not the idle broker.
	for left := e.Opts.FencePartitions; left > 0; left -= rssTopicPartitions {
		if err := e.createTopic(ctx, uniqueTopic("bench-rss"), min(left, rssTopicPartitions)); err != nil {
			return err
		}
	}
	// Let it idle (retention timers, GC) before reading.
	idle := min(e.Opts.Duration, 5*time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idle):
	}
	rss, err := rssMiB(pid)
	if err != nil {
		return err
	}
	e.SetValue(rss, "RSS MiB")
	e.Note("%.1f MiB before creating %d partitions, %.1f MiB after %v idle", base, e.Opts.FencePartitions, rss, idle)
	return nil
}

// rssMiB reads VmRSS of a process.
func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q: %w", rest, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
