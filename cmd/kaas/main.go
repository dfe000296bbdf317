// Command kaas is the broker and its tools: serve, bench, inspect, users,
// etcd, chaos, version.
package main

import (
	"errors"
	"fmt"
	"os"

	"kaas/bench"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `kaas — a Kafka wire-compatible broker built as an actor system.

Usage:
  kaas serve   [flags]   run a broker (kaas serve --help for every flag)
  kaas bench   SCENARIO  benchmark kaas side by side with kfake
  kaas inspect [flags]   look inside a running broker's actors
  kaas users add [flags] store a SCRAM user in a data directory (the first user)
  kaas etcd    [flags]   a single-node embedded etcd for development and tests
  kaas chaos   [flags]   the fault checker: brokers and etcd killed, paused, partitioned
  kaas version           print the version

Run "kaas COMMAND --help" for a command's flags.
`

func main() {
	raiseProcs()
	bench.MaybeRunChild() // a broker child of `kaas bench rss`
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = runServe(args)
	case "bench":
		err = runBench(args)
	case "inspect":
		err = runInspect(args)
	case "users":
		err = runUsers(args)
	case "etcd":
		err = runEtcd(args)
	case "chaos":
		err = runChaos(args)
	case "version", "--version", "-version":
		err = runVersion(args)
	case "help", "--help", "-help", "-h":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kaas: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		var usage usageError
		isUsage := errors.As(err, &usage)
		if !isUsage || !usage.shown {
			fmt.Fprintln(os.Stderr, "kaas:", err)
		}
		if isUsage {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func runVersion(args []string) error {
	if len(args) > 0 {
		if args[0] == "--help" || args[0] == "-help" || args[0] == "-h" {
			fmt.Print("Usage: kaas version\n\nPrints the version kaas was built as (set with -ldflags \"-X main.version=...\").\n")
			return nil
		}
		return usageError{error: fmt.Errorf("version takes no arguments, got %q", args)}
	}
	fmt.Println("kaas", version)
	return nil
}
