package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"kaas/model/proc"
)

func init() {
	register(&Scenario{
		Name: "produce-cluster",
		About: "the produce scenario against a cluster of 3 broker processes and against a cluster of 1 " +
			"(same etcd, same child processes), on this one machine",
		Headline: "records", Latency: "ack",
		Sides:     []string{"kaas-1", "kaas-3"},
		Reference: "kaas-1",
		NoTarget:  true,
		Run:       produceOnCluster,
	})
}

// produceOnCluster runs produceAtFullRate against a cluster of as many
// brokers as the side's name says; the partitions spread over them. The
// CPU per record counts the client (this process) and every broker
// process.
func produceOnCluster(ctx context.Context, e *Env) error {
	n, err := strconv.Atoi(strings.TrimPrefix(e.Side, "kaas-"))
	if err != nil || n < 1 {
		return fmt.Errorf("side %q names no broker count", e.Side)
	}
	c, err := startBenchCluster(ctx, e.Opts, n)
	if err != nil {
		return err
	}
	defer c.close()
	e.Target = c.target(e.Side)
	e.Rec.cpu = func() time.Duration { return proc.CPU() + c.childrenCPU() }
	return produceAtFullRate(produceOpts{})(ctx, e)
}
