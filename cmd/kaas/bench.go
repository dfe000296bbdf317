package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"kaas/bench"
)

func runBench(args []string) error {
	o := bench.Defaults()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: kaas bench [flags] SCENARIO... | all | list\n\n"+
			"Runs each scenario against kaas and against kfake (franz-go's in-memory fake)\n"+
			"in this one process, one side after the other, and prints both sides'\n"+
			"rates, latency percentiles and the kaas/kfake ratio.\n\nScenarios:\n")
		for _, s := range bench.Scenarios() {
			fmt.Fprintf(w, "  %-19s %s\n", s.Name, s.About)
		}
		fmt.Fprintf(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.DurationVar(&o.Duration, "duration", o.Duration, "measured time per side")
	fs.IntVar(&o.Partitions, "partitions", o.Partitions, "partitions of the benchmark topics")
	fs.IntVar(&o.RecordSize, "record-size", o.RecordSize, "record value size in bytes")
	fs.StringVar(&o.Payload, "payload", "random", "record values: random (incompressible, the default) or zeros (compress ~100:1 under snappy: a request-overhead benchmark)")
	fs.StringVar(&o.Brokers, "brokers", "", "benchmark this already-running broker (`host:port`[,...]) instead of starting kaas in-process")
	fs.StringVar(&o.Report, "report", "", "write report.md and PNG charts to this `directory`")
	fs.IntVar(&o.Rate, "rate", o.Rate, "records/s the e2e scenario produces")
	fs.DurationVar(&o.Linger, "linger", o.Linger, "producer linger (franz-go ProducerLinger)")
	fs.IntVar(&o.FencePartitions, "fence-partitions", o.FencePartitions, "partitions of the fence and rss scenarios")
	fs.IntVar(&o.CompactKeys, "compact-keys", o.CompactKeys, "compact-clean: distinct keys of the RSS partition, cleaned after the table; 0: no RSS partition, the table alone")
	fs.IntVar(&o.CompactTable, "compact-table-records", o.CompactTable, "compact-clean: records of the table partition, over a quarter as many keys; 0: no table partition")
	fs.IntVar(&o.CompactValue, "compact-value-size", o.CompactValue, "compact-clean: the table partition's random values are this many bytes (its MB/s is the headline); 0: no table partition, the headline is the MB/s of the --compact-keys partition of 16-byte zero values (records of ~10 bytes on disk, the map's worst case)")
	fs.IntVar(&o.FenceRate, "fence-rate", o.FenceRate, "epoch bumps per second in the fence scenario (each fan-out measured on its own); 0 bumps back to back")
	fs.IntVar(&o.Consumers, "consumers", 0, "group size of the group-join scenarios (default 10); committing consumers of offset-commit, each in its own group (default 1)")
	fs.IntVar(&o.Producers, "producers", 0, "transactional producers of produce-txn and txn-commit, each with its own transactional id, all at once (default 1)")
	fs.IntVar(&o.TxnVersion, "txn-version", 2, "transaction version of produce-txn and txn-commit's clients: 2 (franz-go negotiates KIP-890 part 2: an epoch bump per commit, no AddPartitionsToTxn) or 1 (capped below it: the classic protocol)")
	fs.DurationVar(&o.GroupHeartbeat, "group-heartbeat", o.GroupHeartbeat, "heartbeat interval in the group-join scenarios: classic members', and KIP-848 brokers' (group.consumer.heartbeat.interval.ms)")
	fs.DurationVar(&o.SessionTTL, "session-ttl", o.SessionTTL, "the cluster scenarios' brokers' --session-ttl (failover waits for the lease to expire)")
	fs.DurationVar(&o.FencePoll, "fence-poll-interval", o.FencePoll, "the cluster scenarios' brokers' --fence-poll-interval (fence-ring)")
	flushMs := fs.Int("flush-interval-ms", 0, "in-process kaas: acknowledge before fsync and fsync every N ms, partition and coordinator slot logs alike (0: fsync before every ack)")
	fs.IntVar(&o.Repeat, "repeat", 1, "run each scenario's sides in turn this many times (kaas, kfake, kaas, ...) and report medians and the spread of the ratios")
	gcMiB := fs.Int64("gc-headroom-mib", o.GCHeadroom>>20, "the garbage collector's headroom above the live heap in the measured window, the same on both sides (client and broker share the process's heap); 0: Go's default percentage")
	sides := fs.String("sides", "", "which sides to run, in order (the ratio is first/second); default kaas,kfake, or a scenario's own sides; a scenario with its own sides runs those of them named here")
	noProgress := fs.Bool("no-progress", false, "do not draw progress bars")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (client and in-process broker) to this `file`")
	fs.StringVar(&o.ProfileDir, "profile-dir", "", "write a CPU profile of each side's measured window alone (no setup, no pre-filling) to this `directory`, as SCENARIO-SIDE-RUN.pprof")

	var names []string
	for rest := args; len(rest) > 0; {
		if strings.HasPrefix(rest[0], "-") {
			if err := fs.Parse(rest); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return nil
				}
				return err
			}
			rest = fs.Args()
			continue
		}
		names = append(names, rest[0])
		rest = rest[1:]
	}
	if len(names) == 0 {
		fs.Usage()
		return errors.New("bench: name a scenario (or all)")
	}
	if len(names) == 1 && names[0] == "list" {
		for _, s := range bench.Scenarios() {
			fmt.Printf("%-19s %s\n", s.Name, s.About)
		}
		return nil
	}
	var run []*bench.Scenario
	for _, n := range names {
		if n == "all" {
			run = append(run, bench.Scenarios()...)
			continue
		}
		s, ok := bench.Lookup(n)
		if !ok {
			return fmt.Errorf("bench: no scenario %q (kaas bench list)", n)
		}
		run = append(run, s)
	}
	o.FlushInterval = time.Duration(*flushMs) * time.Millisecond
	o.GCHeadroom = *gcMiB << 20
	if *sides != "" {
		o.Sides = strings.Split(*sides, ",")
	}
	o.Progress = !*noProgress && isTerminal(os.Stderr)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var outcomes []*bench.Outcome
	for _, s := range run {
		if ctx.Err() != nil {
			break
		}
		outcomes = append(outcomes, bench.Run(ctx, s, o))
	}
	if o.Report != "" {
		if err := bench.WriteReport(o.Report, outcomes); err != nil {
			return err
		}
		fmt.Printf("\nreport: %s/report.md\n", o.Report)
	}
	return nil
}

// isTerminal reports whether f is a character device (a terminal), so
// progress bars are not written into logs and pipes.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
