package main

import (
	"os"
	"runtime"
)

// minProcs is the fewest Ps (GOMAXPROCS) kaas runs with, whatever the
// core count.
//
// Every acknowledgement waits for an fsync, and a goroutine in fdatasync
// keeps its P until the runtime's monitor takes it back. With one P per
// core (2 on the project's VM) and 32 transactional producers, ~5 fsyncs
// are in flight at any moment: the Ps sat in them, and every actor
// hand-off, answer and event-loop wake-up queued behind them (goroutines
// waited p90 1.3–1.8 ms to run, 0.13–0.23 ms with 8 Ps, and 8 Ps ran
// 1.45× the transactions). Idle Ps cost no memory; the OS still shares
// the cores among the threads that run.
//
// What the extra Ps do cost is CPU at low load. Each hand-off from a
// gnet event loop to an actor can wake an idle P's thread, and a
// spinning thread that finds work wakes the next: at one transactional
// producer with partition fsyncs off, the broker alone spent ~25% less
// CPU per transaction with 1 P than with 8 (166–214 µs against 199–313).
// But every trial of fewer Ps (1, 2, 3 or 4) lost the transaction rate at
// 32 producers, and with fsyncs on the P count did not move the CPU per
// transaction, which the fdatasyncs' own kernel time dominates. So 8
// stay. The measurements, with their loads, and what else was tried and
// dropped (fsyncs on dedicated goroutines, an inline transaction state
// writer, mailboxes run on the worker that scheduled them) are in this
// file's history (git log -p cmd/kaas/procs.go) and issue 23's notes.
const minProcs = 8

// raiseProcs lifts GOMAXPROCS to minProcs unless the operator set it:
// the GOMAXPROCS environment variable wins, as in every Go program.
func raiseProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}
