package bench

import "time"

// txnCriticalPathWrites is how many durable writes follow one another on
// one transaction's path, each waiting for the one before it (the Ongoing
// entry, the batch, Prepare*, the markers: docs/transactions.md explains
// why none can overlap); Complete* shares the next Ongoing entry's fsync.
const txnCriticalPathWrites = 4

// txnGoalOverhead is the fixed part of issue 23's latency goal.
const txnGoalOverhead = 300 * time.Microsecond

// txnLatencyGoalNote puts a one-producer, fsync-on transaction p50 against
// issue 23's goal: the critical path's durable writes × the machine's
// fsync p50 (timed right after the run) + a fixed overhead.
func txnLatencyGoalNote(e *Env, fsyncP50 time.Duration) {
	s := e.Rec.lat.Snapshot()
	if fsyncP50 <= 0 || s.Count() == 0 {
		return
	}
	goal := txnCriticalPathWrites*fsyncP50 + txnGoalOverhead
	p50 := time.Duration(s.Quantile(0.5))
	verdict := "met"
	if p50 > goal {
		verdict = "not met"
	}
	e.Note("latency goal: p50 ≤ %d durable writes on the critical path × fsync p50 %s + %s = %s; p50 %s: %s",
		txnCriticalPathWrites, durFine(fsyncP50), durFine(txnGoalOverhead), durFine(goal), durFine(p50), verdict)
}
