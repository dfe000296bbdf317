package main

import (
	"os"
	"runtime"
)

// minProcs is the fewest Ps (GOMAXPROCS) kaas runs with, whatever the
// core count.
//
// Every acknowledgement waits for an fsync, and a goroutine in fdatasync
// (a millisecond or more here) keeps its P through the whole call until
// the runtime's monitor takes it back. With 32 transactional producers
// ~5 fsyncs are in flight at any moment (3.2 per transaction at 1,500
// transactions/s), so with one P per core (2 on the project's VM) the Ps
// sat in fsyncs and every actor hand-off, answer and event-loop wake-up
// queued behind them: goroutines waited p90 1.3–1.8 ms to run in the kaas
// side of `kaas bench --producers 32 txn-commit` against 0.2–0.3 ms in the
// kfake side of the same process. With 8 Ps that wait fell to p90
// 0.13–0.23 ms and kaas ran 1.45× the transactions (median of 8
// alternating pairs, load average 6–14); produce and 1-producer
// txn-commit did not lose. Idle Ps cost nothing; the OS still shares the
// cores among the threads that run.
//
// Measured again for issue 23 (kaas side alone, 6 s each, two rounds,
// load average 7–16): 2 and 4 Ps saved no CPU per transaction at 1
// producer (2.5–2.9 and 2.5 ms against 2.3 ms with 8, voluntary context
// switches per transaction 55–57 and 42–48 against 41–47) and 32
// producers ran no faster (563–619 and 429–658 transactions/s against
// 491–734). The CPU of a transaction here is mostly the kernel's: each
// fdatasync costs ~200 µs of this process's CPU on the project's VM
// (virtio kicks and the context switches of its three waits), 0.8 ms of
// the 2.1 ms per transaction with fsync on.
//
// Measured once more (with partition logs preallocated, since reverted; kaas side
// alone, 5 s each, TV2, fsync on, two rounds, load average 1.9–13):
// 1 producer 163–269 transactions/s and 1.68–1.76 ms of CPU each with 8
// Ps, 179–192 and 1.70–1.98 ms with 4, 93–112 and 2.12–2.16 ms with 3; 32
// producers 764–910/s (0.91–0.99 ms) with 8, 538–714 (1.00–1.10 ms) with
// 4, 585–596 (0.89–1.22 ms) with 3. Fewer Ps still lose. Moving the
// fsyncs to a few dedicated goroutines would not change that: a
// goroutine in fdatasync holds its P whichever goroutine it is, and the
// slot logs' fsyncs already run on goroutines of their own (the profile
// shows no cost in starting them, only the fdatasync itself).
//
// Measured again for issue 23 item 4 (GOMAXPROCS set in the environment;
// whole process, kaas and kfake sides of one
// `kaas bench --duration 5s txn-commit` each, TV2, fsync on, two rounds,
// load average 17–19 from other work on the machine): CPU per
// transaction at 1 producer 1.23/0.98 ms with 8 Ps, 1.22/0.91 ms with 4,
// 1.22/1.00 ms with 2 (kfake 130–208 µs in the same runs); at 32
// producers 640/555 µs with 8, 672/601 with 4, 649/661 with 2, while
// the rate fell with the Ps: 2,142/2,584 transactions/s with 8,
// 1,927/1,851 with 4, 1,367/495 with 2. The P count does not move the
// CPU a transaction costs; 8 stay for the rate at 32 producers. What
// the CPU is: a kaas serve child under perf (1 producer) spends 31% of
// its CPU in fdatasync (on this VM's ext4 without a journal each one
// waits three times: data writeback, the inode for the new size, the
// cache flush; ~100–130 µs of process CPU and ~5 context switches per
// call, measured alone), 15–18% in the scheduler (findRunnable, futex,
// stopm) and 5% in sysmon's sleeps; a TV2 transaction makes four
// fsyncs that the contract orders (its data, the coordinator's add of
// the partition, Prepare, the marker), so ~450 µs of it is the disk's
// whatever the P count.
//
// Measured with the coordinators' slot logs under --flush-interval-ms too
// (issue 23 item 4; GOMAXPROCS in the environment, whole process, kaas
// and kfake sides of one `kaas bench --duration 4s --flush-interval-ms 5
// txn-commit` each, TV2, two rounds, load average 13–18 from other
// work): CPU per transaction ÷ kfake's at 1 producer 2.35/2.48× with 8
// Ps, 2.20/2.21× with 2; at 32 producers 2.86/2.26× with 8, 2.48/2.70×
// with 2, the rate 2,277/2,754 transactions/s with 8 against
// 2,102/2,080 with 2. The 1-producer gain is within what the load moves;
// 8 stay. Tried and dropped in the same work: running the transaction
// state writer's mailbox on the sending transactional id actor's
// goroutine when it was idle (no goroutine hand-off either way) halved
// the mailbox wake-ups per transaction (8.3 → 4.4 fsync on, 10.9 → 5.5
// with the interval) but not the CPU: 6.25 → 6.45× kfake's fsync on,
// 2.61 → 2.52× with the interval, 4.35 → 4.89× and 2.15 → 2.62× at 32
// producers (medians of 3, load average 3–12). A wake-up of a parked
// worker is not where the transaction's CPU goes.
//
// Measured on the broker alone (a `kaas serve --flush-interval-ms 5`
// child under `perf stat`, 4 s of `kaas bench --brokers` txn-commit at 1
// producer, GOMAXPROCS in the environment of both processes, two
// alternating rounds, load average 5–8): 195/214 µs of broker CPU and
// 6.0/6.4 context switches per transaction with 1 P against 271/313 µs
// and 9.7/9.8 with 8. That gap is the runtime waking and parking an idle
// P's thread at each goroutine hand-off (perf: 28% of the broker's
// samples in finish_task_switch; 95% of its nanosleeps are spinning
// threads' runqgrab waits to steal a just-readied goroutine). With
// GOMAXPROCS set for the broker only (load average 1–8): 1 producer
// 166/168 µs with 1 P against 199/248 with 8, and 1 P no slower; 32
// producers 109–167 µs with 1 P against 146–190 with 8, but 1 P lost the
// rate in three of four pairs (3,300–6,100 transactions/s against
// 5,600–5,900 with 8). So 8 stay, for the 32-producer rate. Tried and
// dropped in the same work: running a mailbox that a pool worker's own
// batch schedules on that worker right after the batch, instead of waking
// another (keyed by goroutine): context switches per transaction fell
// ~10% (8.1–9.2 against 9.3–10.6) but the broker's CPU per transaction
// did not move beyond the load's spread (212, 292, 222, 236 µs against
// 246, 256, 214, 265, alternating, load average 2–8).
//
// Counted per transaction on the broker alone (txn5: a `kaas serve
// --flush-interval-ms 5` child, 4 s of `kaas bench --brokers` txn-commit,
// TV2, 1 producer, 2,259 transactions/s, load average 0.6–2; syscalls
// from perf stat's syscall tracepoints, the rest from uprobes on runtime
// functions, which slow the run, so those are taken at 600–1,800/s):
// 9.7 context switches, 7.5 futex, 4.6 epoll_pwait (gnet's loop waits
// twice per wake-up, epoll_wait(0) then blocking), 1.1 nanosleep
// (spinning threads' runqgrab), 4.0 pwrite64 (the Ongoing entry, the
// batch, Prepare*, the marker: one per write, none to merge), 2.0 writev
// (one per answer, written directly) and 2.0 read (one per request), 0.17
// fdatasync (the interval's), ~0 epoll_ctl and eventfd writes. 9.3
// goroutine wake-ups (runtime.ready): 3.9 to and from the transaction
// state writer, 1.7 from the event loop (EndTxn, Produce), 2.8 between
// the txn and partition actors (the implicit add's answer, the marker
// and its answer, the add itself), ~0.5 from timers. 0.45 goroutines
// started (AfterFunc firing 59%, the partition's and the slot's interval
// fsyncs the rest), 0.24 AfterFunc armed, none per request. What costs
// CPU is not the wake-ups but the threads woken (runtime.startm, 3.7 per
// transaction): 0.77 at the EndTxn and 0.63 at the Produce the event
// loop hands to an actor, 1.48 from a spinning thread that found work
// waking the next (resetspinning), and at most 0.14 from any one
// actor-to-actor hand-off, which runs on the same thread from runnext.
// That is why the inline slot writer and the worker-local mailbox above
// halved or cut the wake-ups and not the CPU: only the loop's two
// hand-offs, which cannot run on the loop (it never waits on disk), wake
// threads, and idle Ps are what let them. At 32 producers the one
// per-transaction timer was the Complete* tick (0.65 fired per
// transaction; now stopped once covered, actors/txn armComplete: txn
// messages 6.76/6.67 → 6.10/6.12 per transaction; CPU per transaction
// against kfake 2.59/1.83× → 2.10/1.89×, two rounds, load average
// 5–13, within the spread); the
// slots' interval fsyncs start 0.77 goroutines per transaction there, and
// sysmon's retakes of Ps in fdatasync wake 0.34 threads.
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
