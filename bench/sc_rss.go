package bench

import (
	"context"
	"fmt"
	"runtime"
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
	pid, stop, err := startBrokerChild(e)
	if err != nil {
		return err
	}
	defer stop()
	base, err := procMiB(pid, "VmRSS:")
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
	rss, err := procMiB(pid, "VmRSS:")
	if err != nil {
		return err
	}
	e.SetValue(rss, "RSS MiB")
	e.Note("%.1f MiB before creating %d partitions, %.1f MiB after %v idle", base, e.Opts.FencePartitions, rss, idle)
	return nil
}
