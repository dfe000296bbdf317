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

// txnFsyncCPUNote says how much of a transaction's process CPU its fsyncs
// alone cost, at the CPU of a write and fdatasync into preallocated room
// timed right after the run: issue 23's CPU goal puts the whole
// transaction against kfake's, which makes none, so with fsync on this is
// the part no change outside the kernel removes.
func txnFsyncCPUNote(e *Env, fsyncsPerTxn float64) {
	if fsyncsPerTxn < 0.5 {
		return
	}
	cpu := fsyncCPU(e.Opts.TempDir, fsyncSample)
	if cpu <= 0 {
		return
	}
	e.Note("fsync CPU per transaction: %.2f fsyncs × %s of process CPU each (200-byte write + fdatasync into preallocated room, %d back to back after the run) = %s",
		fsyncsPerTxn, durFine(cpu), fsyncSample, durFine(time.Duration(fsyncsPerTxn*float64(cpu))))
}
