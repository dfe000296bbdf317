// Command kaas is the broker and its tools: serve, bench, inspect, version.
package main

import (
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
  kaas version           print the version

Run "kaas COMMAND --help" for a command's flags.
`

func main() {
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
	case "version", "--version", "-version":
		fmt.Println("kaas", version)
	case "help", "--help", "-help", "-h":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kaas: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kaas:", err)
		os.Exit(1)
	}
}
