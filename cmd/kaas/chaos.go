package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"kaas/chaos"
)

const chaosUsage = `Usage: kaas chaos [flags]
       kaas chaos check DIR

Runs kaas's own Jepsen-style fault checker (docs/chaos.md): for each seed,
three brokers and an etcd as child processes of this binary on one data
directory, idempotent, transactional and exactly-once workloads with 1-3 s
client timeouts, and a nemesis that SIGKILLs and SIGSTOPs brokers and etcd
and, as root, cuts a broker from etcd (and from its peers) with network
namespaces. It prints one summary line per seed (faults by kind, figures,
every anomaly count) and exits 1 if any seed found an anomaly. Each run's
logs, history and final read stay in --dir.

"check DIR" checks a finished run's history.jsonl and final.json again.

Flags:
`

func runChaos(args []string) error {
	if len(args) > 0 && args[0] == "check" {
		if len(args) != 2 {
			return usageError{error: errors.New("chaos check takes one run directory")}
		}
		return chaosCheck(args[1])
	}
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), chaosUsage)
		fs.PrintDefaults()
	}
	seeds := fs.Int("seeds", 1, "number of seeds to run, one after the other")
	first := fs.Uint64("seed", 1, "first seed (a failing seed's schedule repeats with --seed N --seeds 1)")
	duration := fs.Duration("duration", 60*time.Second, "how long the faults go on in each run")
	dir := fs.String("dir", "chaos-runs", "`directory` for the runs (one subdirectory per seed)")
	require := fs.Bool("require-partitions", os.Getenv("KAAS_CHAOS_REQUIRE_PARTITIONS") == "1", "fail instead of running without network partitions when namespaces are unavailable (KAAS_CHAOS_REQUIRE_PARTITIONS=1)")
	plantFlag := fs.String("plant", "", "debug: change the final read before the check (lost: drop one acknowledged record) to see a run fail")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err, true}
	}
	if fs.NArg() > 0 {
		return usageError{error: fmt.Errorf("chaos takes no arguments, got %q", fs.Args())}
	}
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	var failed, broken int
	var lines []string
	for seed := *first; seed < *first+uint64(*seeds); seed++ {
		runDir := filepath.Join(*dir, fmt.Sprintf("seed-%d-%s", seed, time.Now().Format("20060102-150405")))
		res, err := chaos.Run(ctx, chaos.Config{Binary: bin, Seed: seed, Duration: *duration, Dir: runDir,
			RequirePartitions: *require, Plant: *plantFlag, Logf: logf})
		if err != nil {
			broken++
			fmt.Fprintf(os.Stderr, "chaos seed=%d: the run could not complete: %v (logs in %s)\n", seed, err, runDir)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		fmt.Println(res.Summary)
		lines = append(lines, res.Summary)
		if res.Report.Total() > 0 {
			failed++
			fmt.Fprintf(os.Stderr, "%s(evidence: %s)\n", res.Report.Evidence(), runDir)
		}
	}
	if *seeds > 1 {
		fmt.Printf("chaos: %d seeds, %d with anomalies, %d runs that could not complete\n", len(lines)+broken, failed, broken)
	}
	if failed > 0 || broken > 0 {
		return fmt.Errorf("%d seeds with anomalies, %d runs that could not complete", failed, broken)
	}
	return nil
}

func chaosCheck(dir string) error {
	hf, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return err
	}
	defer hf.Close()
	events, err := chaos.ReadHistory(hf)
	if err != nil {
		return err
	}
	ff, err := os.Open(filepath.Join(dir, "final.json"))
	if err != nil {
		return err
	}
	defer ff.Close()
	final, err := chaos.ReadFinal(ff)
	if err != nil {
		return err
	}
	rep := chaos.Check(events, final)
	fmt.Println(rep.Summary("chaos check " + dir))
	fmt.Print(rep.Evidence())
	if rep.Total() > 0 {
		return fmt.Errorf("%d anomalies", rep.Total())
	}
	return nil
}
