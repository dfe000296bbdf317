package bench

import (
	"fmt"
	"sort"
	"strings"

	"kaas/model/proc"
)

// handoffCounts are the hand-offs between threads and goroutines so far:
// the process's context switches (either side: client and broker share
// the process) and, from an in-process kaas, its actor mailbox wake-ups
// (each a goroutine woken or started) and the messages its actors took,
// by kind. Per transaction they are what issue 23 cuts: kfake serves a
// request on the connection's goroutine.
type handoffCounts struct {
	voluntary, involuntary int64
	kaas                   bool
	wakeups, started       float64
	messages               map[string]float64
}

func readHandoffs(e *Env) handoffCounts {
	var c handoffCounts
	c.voluntary, c.involuntary = proc.ContextSwitches()
	if e.Target == nil || e.Target.Metrics == nil {
		return c
	}
	fams, err := e.Target.Metrics.Registry.Gather()
	if err != nil {
		return c
	}
	c.kaas, c.messages = true, map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			switch f.GetName() {
			case "kaas_actor_wakeups_total":
				c.wakeups += m.GetCounter().GetValue()
			case "kaas_actor_workers_started_total":
				c.started += m.GetCounter().GetValue()
			case "kaas_actor_messages_processed_total":
				c.messages[labelValue(m.Label, "kind")] += m.GetCounter().GetValue()
			}
		}
	}
	return c
}

// handoffsPerOpNote notes the hand-offs per op since before (read at
// e.Begin); call it as the measured window ends, before other notes
// read metrics or time the disk.
func handoffsPerOpNote(e *Env, before handoffCounts, what string) {
	after := readHandoffs(e)
	ops := float64(e.Rec.ops.Load())
	if ops == 0 {
		return
	}
	e.Note("context switches per %s (whole process): %.1f voluntary, %.1f involuntary", what,
		float64(after.voluntary-before.voluntary)/ops, float64(after.involuntary-before.involuntary)/ops)
	if !before.kaas || !after.kaas {
		return
	}
	delta := map[string]float64{}
	var total float64
	for k, v := range after.messages {
		if d := v - before.messages[k]; d > 0 {
			delta[k] = d
			total += d
		}
	}
	kinds := make([]string, 0, len(delta))
	for k := range delta {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return delta[kinds[i]] > delta[kinds[j]] })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.2f", k, delta[k]/ops)
	}
	e.Note("actor hand-offs per %s: %.2f mailbox wake-ups (%.2f started a worker), %.2f messages (%s)", what,
		(after.wakeups-before.wakeups)/ops, (after.started-before.started)/ops, total/ops, strings.Join(parts, ", "))
}
